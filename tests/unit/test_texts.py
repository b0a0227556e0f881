"""Topic and document readers: the TREC layouts, JSONL and TSV, and file:line errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from evalstore.errors import InputFormatError
from evalstore.io.texts import DocumentText, TopicStatement, read_documents, read_topics

SHARED_TOPICS = Path(__file__).resolve().parents[3] / "shared" / "data" / "core18" / "topics.core18.txt"

TREC_TOPICS = """<top>
<num> Number: 321 </num>
<title>
Women in Parliaments
</title>
<desc> Description:
Pertinent documents will reflect the fact that women are poorly represented.
</desc>
<narr> Narrative
Documents on the lack of representation by women.
</narr>
</top>

<top>
<num> Number: 336
<title> Black Bear Attacks
<desc> Description:
How often do black bears attack?
<narr> Narrative:
Reports of attacks.
</top>
"""


def test_a_trec_topic_file_gives_title_description_and_narrative(tmp_path: Path) -> None:
    path = tmp_path / "topics.txt"
    path.write_text(TREC_TOPICS)
    assert read_topics(path) == [
        TopicStatement(
            "321",
            "Women in Parliaments",
            "Pertinent documents will reflect the fact that women are poorly represented.",
            "Documents on the lack of representation by women.",
        ),
        TopicStatement("336", "Black Bear Attacks", "How often do black bears attack?", "Reports of attacks."),
    ]


@pytest.mark.skipif(not SHARED_TOPICS.exists(), reason="../shared/data/core18 is not beside the repository")
def test_the_core18_topic_file_reads_whole() -> None:
    topics = read_topics(SHARED_TOPICS)
    assert len(topics) == 50 and all(t.title and t.description and t.narrative for t in topics)


def test_jsonl_and_tsv_topics(tmp_path: Path) -> None:
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"query_id": "1", "query": "sous vide"}\n{"topic": "2", "title": "b", "narrative": "n"}\n')
    assert read_topics(jsonl) == [TopicStatement("1", "sous vide"), TopicStatement("2", "b", None, "n")]
    tsv = tmp_path / "t.tsv"
    tsv.write_text("915593\twhat types of food can you cook sous vide\n")
    assert read_topics(tsv) == [TopicStatement("915593", "what types of food can you cook sous vide")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1\ta\n2\n", "t.txt:2: expected 'topic<TAB>title' (or a TREC topic file, or JSONL)"),
        ("1\ta\n1\tb\n", "t.txt:2: topic 1 is given twice (also at line 1); keep one"),
        ("<top>\n<title> x\n</top>\n", "t.txt:1: a <top> without <num>: give each topic its number"),
        (
            '{"topic": "1"}\n',
            "t.txt:1: a topic needs an id ('topic', 'query_id' or 'qid') and a title ('title' or 'query')",
        ),
        (
            '{"topic": "1", "title": "x"}\n{"topic": "2", "title": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
            "t.txt:2: not a JSON object (nested too deeply)",
        ),
        (
            '{"topic": "1", "title": "a\\u0000b"}\n',
            "t.txt:1: the line holds a NUL character (byte 0), which no docno, topic id, tag or label has",
        ),
    ],
)
def test_bad_topics_are_refused_with_their_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "t.txt"
    path.write_text(text)
    with pytest.raises(InputFormatError) as raised:
        read_topics(path)
    assert str(raised.value) == f"{tmp_path}/{message}"


def test_documents_from_jsonl_and_gzipped_trec_sgml(tmp_path: Path) -> None:
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text('{"doc_id": "d1", "title": "T", "text": "body"}\n{"docno": "d2", "contents": "x"}\n')
    assert [d for _, d in read_documents(jsonl)] == [DocumentText("d1", "T", "body"), DocumentText("d2", None, "x")]
    sgml = tmp_path / "d.sgml.gz"
    with gzip.open(sgml, "wt") as out:
        out.write(
            "<DOC>\n<DOCNO> FT911-3 </DOCNO>\n<HEADLINE>Bears &amp; people</HEADLINE>\n"
            "<TEXT>\nA <B>black</B> bear.\n</TEXT>\n</DOC>\n"
        )
    assert [d for _, d in read_documents(sgml)] == [DocumentText("FT911-3", "Bears & people", "A  black  bear.")]


def test_an_unclosed_document_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "d.sgml"
    path.write_text("<DOC>\n<DOCNO>a</DOCNO>\n</DOC>\n<DOC>\n<DOCNO>b</DOCNO>\n")
    with pytest.raises(InputFormatError, match=r"d.sgml:4: a <DOC> is not closed by </DOC>"):
        list(read_documents(path))
