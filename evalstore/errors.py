"""The exceptions evalstore raises, in one small tree.

    EvalstoreError                    every error a user can act on (CLI exit code 1)
    ├── InputFormatError              a file or frame is malformed; carries path and line
    ├── NotFoundError                 a named run, qrels set, job... does not exist
    ├── ConflictError                 a name is taken by other content
    ├── SchemaOutOfDateError          the database needs upgrading
    ├── InvalidParameterError         a measure name or parameter is not allowed (also a ValueError)
    ├── EvaluationError               an evaluation cannot be computed (e.g. no shared topics)
    ├── TrackingError                 MLflow could not be reached or refused (results stay pending)
    ├── AuthenticationError           no credentials, or a wrong, expired or revoked one (HTTP 401)
    ├── AccessDenied                  the role or the task's rules do not allow it (HTTP 403)
    └── LimitExceeded                 a team's quota (409), the upload size (413), the write rate (429)

An error's message (``str(error)``) says what is wrong: a fact, in words every edge can show.
What to do about it is its :class:`Remedy`, given apart because each edge says it in its own
words: the CLI names a command or an option, a page names a field or a button, and someone
without a terminal on the server is told to ask their organiser. The CLI maps the tree to exit
codes and words the remedies in one place (`evalstore.cli._errors`), the HTTP service to status
codes (`evalstore.web.errors`) and the pages' words (`evalstore.web.wording`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Remedy:
    """What to do about an error, as each edge says it.

    ``cli``: the sentence for the command line, which names the command or option to use ("Pass
    --replace to replace it, or choose another --name."; after a ``path:line: problem``, a clause:
    "use --name-from file"). ``web``: the sentence for the pages and the API, which names a page,
    field or button and never a command; None when only whoever runs the service can act: admins
    and organisers are then given ``cli``, anyone else is told to ask their organiser.
    """

    cli: str
    web: str | None = None


class EvalstoreError(Exception):
    """Base class of every error evalstore reports to a user. ``str()`` is the fact; ``remedy``,
    what to do about it, if anything."""

    def __init__(self, *args: object, remedy: Remedy | None = None) -> None:
        super().__init__(*args)
        self.remedy = remedy

    def on_the_command_line(self) -> str:
        """The message as the CLI gives it, and as a failed job keeps it: the fact and the CLI's remedy."""
        return told(str(self), self.remedy.cli if self.remedy else None)


def told(fact: str, remedy: str | None) -> str:
    """``fact``, then ``remedy`` (in one edge's words): on a line of its own below a message of
    several lines (an upload's ``file:line`` problems); else after the fact's sentence, or, after
    a ``path:line: problem`` (no full stop), as its next clause ("; use --name-from file")."""
    if not remedy:
        return fact
    if "\n" in fact:
        return f"{fact}\n{remedy}"
    if fact.endswith((".", "!", "?")) or remedy.startswith("("):
        return f"{fact} {remedy}"
    return f"{fact}. {remedy}" if remedy[:1].isupper() else f"{fact}; {remedy}"


class InputFormatError(EvalstoreError):
    """A run, qrels or table file is malformed. ``str()`` is ``path:line: what is wrong``."""

    def __init__(self, path: str, line: int | None, problem: str, *, remedy: Remedy | None = None) -> None:
        self.path = path
        self.line = line
        self.problem = problem
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {problem}", remedy=remedy)


class NoRowsError(InputFormatError):
    """A run or qrels (a file, or in-memory input) holds no run or qrels lines at all: comments and
    blank lines only, or nothing (``zero_bytes``: not even a byte, which trec_eval cannot read)."""

    def __init__(self, path: str, problem: str, *, zero_bytes: bool = False) -> None:
        super().__init__(path, None, problem)
        self.zero_bytes = zero_bytes


class NotFoundError(EvalstoreError):
    """A named object does not exist in the store."""


class ConflictError(EvalstoreError):
    """The name is already used by different content."""


def replace_or_rename(it: str = "it") -> Remedy:
    """The remedy of a name taken by other content: the CLI can replace ``it``; a page's form only
    takes another name."""
    return Remedy(cli=f"Pass --replace to replace {it}, or choose another --name.", web="Choose another name.")


class SchemaOutOfDateError(EvalstoreError):
    """The database schema is missing or older than this version of evalstore."""


class InvalidParameterError(EvalstoreError, ValueError):
    """A measure name or a parameter value is not allowed."""


class EvaluationError(EvalstoreError):
    """An evaluation cannot be computed from the given inputs."""


class TrackingError(EvalstoreError):
    """MLflow could not be reached or refused a request; the results stay pending for a sync."""


class AuthenticationError(EvalstoreError):
    """No credentials where some are needed, or a wrong, expired or revoked password or token."""


class AccessDenied(EvalstoreError):
    """The caller is known, but their role (or the task's rules, e.g. its submission window) does not
    allow this."""


class LimitExceeded(EvalstoreError):
    """A limit was reached: ``limit`` is ``quota`` (a team's runs in a task), ``size`` (an upload),
    ``rate`` (writes per minute; ``retry_after`` seconds) or ``busy`` (the server does as much of
    this at once as it may: a password check; ``retry_after`` seconds)."""

    def __init__(
        self, limit: str, message: str, retry_after: int | None = None, *, remedy: Remedy | None = None
    ) -> None:
        self.limit = limit
        self.retry_after = retry_after
        super().__init__(message, remedy=remedy)


# Each error's HTTP status: the service answers with it (evalstore.web.errors), the client turns it
# back into the error (evalstore.client). The first matching class wins.
HTTP_STATUS: tuple[tuple[type[EvalstoreError], int], ...] = (
    (AuthenticationError, 401),
    (AccessDenied, 403),
    (NotFoundError, 404),
    (ConflictError, 409),
    (InputFormatError, 422),
    (InvalidParameterError, 422),
)
LIMIT_HTTP_STATUS = {"quota": 409, "size": 413, "rate": 429, "busy": 503}
