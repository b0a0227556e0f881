#!/usr/bin/env python3
"""Write a synthetic run and qrels of the MS MARCO dev shape for benchmarks.

Default: 6,980 topics x 1,000 docs (7 million rows), 1-2 relevant docs per topic, scores rounded
to 3 decimals so that many are tied (the tie rule matters). Deterministic for a given --seed.

    python scripts/make_synthetic.py OUT_DIR [--topics 6980] [--depth 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--topics", type=int, default=6980)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    topics = np.sort(rng.choice(np.arange(1_000_000, 1_200_000), size=args.topics, replace=False))
    n = args.topics * args.depth
    topic_col = np.repeat(topics, args.depth)
    # distinct docs within a topic: a random offset plus a stride
    base = rng.integers(0, 8_000_000, size=args.topics)
    docs = (np.repeat(base, args.depth) + np.tile(np.arange(args.depth) * 7, args.topics)) % 8_841_823
    scores = np.round(np.sort(rng.normal(10, 2, size=(args.topics, args.depth)), axis=1)[:, ::-1], 3).ravel()
    ranks = np.tile(np.arange(1, args.depth + 1), args.topics)
    run = pa.table(
        {
            "topic": pa.array(topic_col.astype(str)),
            "q0": pa.array(np.full(n, "Q0")),
            "doc": pa.array(docs.astype(str)),
            "rank": ranks,
            "score": pa.array(np.char.mod("%.3f", scores)),
            "tag": pa.array(np.full(n, "synthetic")),
        }
    )
    write = pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    pacsv.write_csv(run, args.out / "run.txt", write_options=write)
    # 1-2 relevant per topic, some retrieved (at a random depth), some not
    n_rel = rng.integers(1, 3, size=args.topics)
    rel_topics = np.repeat(topics, n_rel)
    picks = rng.integers(0, args.depth * 2, size=len(rel_topics))
    topic_index = np.repeat(np.arange(args.topics), n_rel)
    rel_docs = np.where(
        picks < args.depth,
        docs.reshape(args.topics, args.depth)[topic_index, np.minimum(picks, args.depth - 1)],
        9_000_000 + np.arange(len(rel_topics)),
    )
    qrels = pa.table(
        {
            "topic": pa.array(rel_topics.astype(str)),
            "iter": pa.array(np.full(len(rel_topics), "0")),
            "doc": pa.array(rel_docs.astype(str)),
            "rel": np.ones(len(rel_topics), dtype=np.int64),
        }
    )
    # the same doc can be drawn twice for one topic: keep unique pairs
    frame = qrels.to_pandas().drop_duplicates(["topic", "doc"])
    pacsv.write_csv(pa.Table.from_pandas(frame, preserve_index=False), args.out / "qrels.txt", write_options=write)


if __name__ == "__main__":
    main()
