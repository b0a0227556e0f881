"""The bandit pool's judging order (plain Python lists, one step per judgment) is the order of the
vectorised statement of the same policy below: every arm's score computed as a numpy array at
each step, the best alive arm by argmax (ties to the first). Both policies, any budget."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstore.statistics import pooling


def _vectorised(lists: list[list[str]], relevant: set[str], unknown: set[str], policy: str, budget: int, seed: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    arms = len(lists)
    hits, pulls = np.zeros(arms), np.zeros(arms)
    pointers = [0] * arms
    alive = np.ones(arms, dtype=bool)
    known: dict[str, bool] = {}
    sequence: list[str] = []
    while alive.any() and len(sequence) < budget:
        score = rng.beta(hits + 1, pulls - hits + 1) if policy == "thompson" else (hits + 1) / (pulls + 2)
        arm = int(np.argmax(np.where(alive, score, -np.inf)))
        docs = lists[arm]
        if pointers[arm] == len(docs):
            alive[arm] = False
            continue
        doc = docs[pointers[arm]]
        pointers[arm] += 1
        if doc not in known:
            known[doc] = doc in relevant and doc not in unknown
            sequence.append(doc)
        pulls[arm] += 1
        hits[arm] += known[doc]
    return sequence


DOCS = [f"d{i}" for i in range(30)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(DOCS), unique=True, max_size=30), min_size=1, max_size=7),
    st.sets(st.sampled_from(DOCS)),
    st.sets(st.sampled_from(DOCS), max_size=5),
    st.sampled_from(["maxmean", "thompson"]),
    st.integers(min_value=1, max_value=60),
    st.integers(min_value=0, max_value=2**31 - 1),
)
def test_the_bandit_order_is_the_vectorised_policys(
    lists: list[list[str]], relevant: set[str], unknown: set[str], policy: str, budget: int, seed: int
) -> None:
    def oracle(_topic: str, doc: str) -> int | None:
        return None if doc in unknown else int(doc in relevant)

    settings_ = pooling.PoolSettings("bandit", None, budget, seed, bandit_policy=policy)
    ours = pooling._bandit("t", lists, oracle, settings_, np.random.default_rng(seed))
    assert ours == _vectorised(lists, relevant, unknown, policy, budget, seed)
