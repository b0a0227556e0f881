"""`python tests/judges/_llama_server.py ARGS`: llama-cpp-python's OpenAI-compatible server
(``python -m llama_cpp.server ARGS``) with ggml's extra buffer types off.

Those repack weights for AMX where the CPU advertises it; on our virtual machines the CPU
advertises AMX but the first AMX instruction (``tilezero``) raises SIGILL, and the server dies on
its first completion. Without them ggml multiplies with AVX-512 and the answers are the same
model's; only the speed on AMX hardware is lost.
"""

from __future__ import annotations

import llama_cpp.llama_cpp as bindings

_default = bindings.llama_model_default_params


def _without_extra_buffers() -> bindings.llama_model_params:
    params = _default()
    params.use_extra_bufts = False
    return params


if __name__ == "__main__":
    bindings.llama_model_default_params = _without_extra_buffers
    from llama_cpp.server.__main__ import main

    main()
