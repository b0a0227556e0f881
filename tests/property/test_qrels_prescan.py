"""The qrels pre-scan that sends a file the precise way (blank and comment lines, a 0x prefix):
its three quick scans answer as the one multiline pattern they replace, on any text made of the
bytes that matter."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstore.io.trec_text import _has_hex_prefix, _qrels_irregular

# the pattern the scans replace (get_qrels.c's line rules, one multiline pattern)
REFERENCE = re.compile(rb"(?m)^[ \t\r\f\v]*[#\n]|^[ \t\r\f\v]+\Z")
HEX_REFERENCE = re.compile(rb"(?:^|[ \t])[+-]?0[xX]", re.MULTILINE)

TEXT = st.lists(st.sampled_from([b"\n", b" ", b"\t", b"\r", b"\f", b"\v", b"#", b"1", b"0", b"x", b"X", b"-", b"d"]))


@settings(max_examples=400)
@given(TEXT)
def test_the_quick_scans_answer_as_the_multiline_pattern(parts: list[bytes]) -> None:
    data = b"".join(parts)
    assert _qrels_irregular(data) == bool(REFERENCE.search(data)), data
    assert _has_hex_prefix(data) == bool(HEX_REFERENCE.search(data)), data
