"""LLM assessors beside human ones: judges that label a pool's documents through any
OpenAI-compatible chat-completions endpoint, with provenance on every label; qrels versions built
from human labels, a judge's or both; and the report of how far two sets of judgments agree.

Modules: :mod:`.prompts` (templates, the answer's parsing), :mod:`.client` (the one HTTP path to an
LLM, retries), :mod:`.registry` (judges add/list/show), :mod:`.running` (judges run, resumable),
:mod:`.versions` (qrels build/versions, re-evaluation), :mod:`.compare` (judgments compare),
:mod:`.probe` (judges probe), :mod:`.preferences` (judges prefer, judgments
preferences: pairwise preferences and their Bradley-Terry ratings).
"""
