"""Numbers as trec_eval reads them: C's ``atof`` and ``atol`` (glibc, "C" locale).

Both read the longest prefix of the text that is a number and ignore the rest: a score ``1_000``
is 1 and a relevance ``0x3`` is 0 (``atol`` reads decimal digits only), ``-m P.1e1`` means P_1.
Digits are ASCII ``0``-``9`` only (Python's ``float``/``int`` also read other scripts' digits and
``_`` separators, which C does not). Where no prefix is a number at all, C returns 0 silently;
these functions return None so that callers can refuse the text with its place instead
(a documented difference, docs/conformance.md). Written by hand: the standard library has no prefix
parser with C's grammar (``float`` wants the whole text and reads more than C does).
"""

from __future__ import annotations

import math
import re
from functools import cache

# The patterns are compiled when first used, not at import (~0.1 ms a pattern): an ordinary
# `trec-eval` uses neither.


@cache
def _float_prefix() -> re.Pattern[str]:
    """strtod's grammar (C11 7.22.1.3): white space, then a decimal or hexadecimal floating
    constant, INF/INFINITY or NAN/NAN(chars), case-insensitive."""
    return re.compile(
        r"[ \t\n\v\f\r]*([+-]?)(?:"
        r"(?P<hex>0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?)"
        r"|(?P<dec>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?)"
        r"|(?P<inf>inf(?:inity)?)"
        r"|(?P<nan>nan(?:\([0-9a-z_]*\))?))",
        re.IGNORECASE | re.ASCII,
    )


@cache
def _long_prefix() -> re.Pattern[str]:
    return re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)", re.ASCII)


LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def atof_prefix(text: str) -> tuple[float, int] | None:
    """(C ``atof``'s value of ``text``, how many characters it read), or None where it reads none."""
    match = _float_prefix().match(text)
    if match is None:
        return None
    if match["hex"] is not None:
        body = match["hex"]
        value = float.fromhex(body + ("p0" if "p" not in body.lower() else ""))
    elif match["dec"] is not None:
        value = float(match["dec"])
    elif match["inf"] is not None:
        value = float("inf")
    else:
        value = float("nan")
    return math.copysign(value, -1.0 if match[1] == "-" else 1.0), match.end()


def atof(text: str) -> float | None:
    """C's ``atof(text)``; None where C would read no number (and return 0)."""
    found = atof_prefix(text)
    return None if found is None else found[0]


def strict_float(text: str) -> float | None:
    """The number ``text`` is when all of it is one C floating constant; None otherwise."""
    found = atof_prefix(text)
    return found[0] if found is not None and found[1] == len(text) else None


def atol(text: str) -> int | None:
    """C's ``atol(text)`` (glibc's strtol: saturates at the 64-bit range); None where it reads no digit."""
    match = _long_prefix().match(text)
    if match is None:
        return None
    return max(LONG_MIN, min(LONG_MAX, int(match[1])))
