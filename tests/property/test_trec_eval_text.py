"""trec_eval's per-topic lines built by pyarrow from each measure's distinct values, against one
line at a time: repeated values, -0.0 beside 0.0, NaN, infinities, counts, relstrings, -Z."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from evalstore.metrics import parse_measure
from evalstore.trec_eval.output import _format_column, _label, render_lines

MEASURES = [
    ("P_5", parse_measure("P@5")),
    ("num_ret", parse_measure("NumRet")),
    ("relstring", parse_measure("RelString@10")),
    ("map", parse_measure("AP")),
]
NUMBERS = st.one_of(
    st.sampled_from([0.0, -0.0, 0.5, 1.0, 0.00005, 0.00015, float("nan"), float("inf"), 3.0]),
    st.floats(allow_nan=True, allow_infinity=True),
)


@settings(max_examples=200, deadline=None)
@given(
    topics=st.lists(st.sampled_from(["1", "2", "10", "301", "q7", "é"]), min_size=1, max_size=6, unique=True),
    data=st.data(),
    zscores=st.booleans(),
)
def test_per_topic_lines_equal_one_line_at_a_time(topics: list[str], data: st.DataObject, zscores: bool) -> None:
    columns = {}
    for _, measure in MEASURES:
        if measure.spec.value_type == "str":
            columns[measure] = data.draw(
                st.lists(st.sampled_from(["RN--", "", "R"]), min_size=len(topics), max_size=len(topics))
            )
        else:  # counts are whole numbers
            numbers = st.integers(0, 10**7).map(float) if measure.spec.value_type == "int" else NUMBERS
            columns[measure] = data.draw(st.lists(numbers, min_size=len(topics), max_size=len(topics)))
    rows = [(name, name, measure) for name, measure in MEASURES]
    text = render_lines(
        rows, topics, columns.__getitem__, lambda m: 0.0, "run", per_query=True, summary=False, zscores=zscores
    )
    expected = "".join(
        f"{_label(name, measure, zscores)}\t{topic}\t{_format_column(measure, [columns[measure][t]], zscores)[0]}\n"
        for t, topic in enumerate(topics)
        for name, measure in MEASURES
    )
    assert text == expected
