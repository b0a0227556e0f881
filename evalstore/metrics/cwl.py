"""C/W/L measures (Moffat et al.'s framework), as cwl_eval computes them for ir_measures.

A C/W/L measure is a user model: ``C_i``, the probability that a user who has seen rank ``i``
goes on to rank ``i+1``, fixes the weight ``W_i`` of each rank (the chance a random look lands
there: ``W_1 = 1 / sum_i prod_{j<i} C_j``, ``W_i = W_1 prod_{j<i} C_j``), and the measure is the
expected rate of gain per document, ``sum_i W_i g_i``. Each family here is one ``C`` vector,
transcribed from cwl_eval 1.0.12 (``cwl/ruler/measures``, Azzopardi, Thomas and Moffat, SIGIR 2019).

The gains are ir_measures' (``ir_measures/providers/cwl_eval.py``): a judgment's level, negative
levels as 0, clipped to ``[min_rel, max_rel]`` and scaled to ``[0, 1]``; a document outside the
qrels gains 0 (cwl_eval's lower bound). cwl_eval looks at the top :data:`CWL_DEPTH` places
whatever the ranking's length (ir_measures' ``max_n``): a shorter ranking is padded with gain 0,
and that padding counts in ``W_1`` for the measures that run to full depth (INST, INSQ, NERR10,
NERR11). We compute it here rather than call cwl_eval, which walks each topic in Python: every
topic at once, in blocks of topics so that the (topics x 1000) matrices stay small.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from evalstore.errors import InvalidParameterError
from evalstore.metrics.preparation import Ranking
from evalstore.metrics.registry import REQUIRED, Param, family

CWL_DEPTH = 1000  # cwl_eval's max_n (ir_measures passes its default)
BLOCK_TOPICS = 2000  # (2000 x 1000) float64 matrices: 16 MB each

MAX_REL = Param(int, REQUIRED, doc="the grade scaled to gain 1 (higher grades count as it)")
MIN_REL = Param(int, 0, doc="the grade scaled to gain 0 (lower grades count as it)")
T_GOAL = Param(float, 1.0, low=1e-9, doc="T, the gain the user wants (in gains of [0, 1])")
CWL_CUTOFF = Param(int, REQUIRED, low=1, doc="rank cutoff k")
CWL_REFERENCE = "Azzopardi, Thomas & Moffat, SIGIR 2019 (cwl_eval); ir_measures' cwl_eval provider"

ContinuationOf = Callable[[np.ndarray], np.ndarray]


def _gains(rk: Ranking, min_rel: int, max_rel: int) -> np.ndarray:
    """(n, CWL_DEPTH): the gain of each of the top places, ir_measures' scaling of the levels."""
    if min_rel >= max_rel:
        raise InvalidParameterError(f"min_rel must be below max_rel. Got min_rel={min_rel}, max_rel={max_rel}.")
    gains = np.zeros((rk.n, CWL_DEPTH))
    within = rk.judged_position < CWL_DEPTH
    # the judged entries: levels 0 and above, and UNJUDGED (a negative level in the qrels), 0 to
    # ir_measures, which clips negative levels to 0 before scaling
    level = np.maximum(rk.judged_rel[within], 0).astype(np.float64)
    scaled = (np.clip(level, min_rel, max_rel) - min_rel) / (max_rel - min_rel)
    gains[rk.judged_row[within], rk.judged_position[within]] = scaled
    return gains


def _expected_rate_of_gain(rk: Ranking, min_rel: int, max_rel: int, continuation: ContinuationOf) -> np.ndarray:
    """sum_i W_i g_i per topic, W from the C matrix ``continuation(gains)`` as cwl_eval's
    ``CWLMetric.w_vector`` makes it (the product of C up to each rank, normalised by its sum)."""
    out = np.zeros(rk.n)
    for start in range(0, rk.n, BLOCK_TOPICS):
        block = rk.topic_rows(start, min(start + BLOCK_TOPICS, rk.n))
        gains = _gains(block, min_rel, max_rel)
        c = continuation(gains)
        reach = np.ones_like(c)
        np.cumprod(c[:, :-1], axis=1, out=reach[:, 1:])
        first = 1.0 / reach.sum(axis=1)
        out[start : start + block.n] = (reach * first[:, None] * gains).sum(axis=1)
    return out


def _ranks() -> np.ndarray:
    return np.arange(1, CWL_DEPTH + 1, dtype=np.float64)


@family(
    "BPM",
    aliases=("BPM-Static",),  # cwl_eval's name
    params={"T": T_GOAL, "cutoff": CWL_CUTOFF, "min_rel": MIN_REL, "max_rel": MAX_REL},
    reference="Zhang et al., SIGIR 2017 (static BPM); " + CWL_REFERENCE,
)
def bejeweled_player_model(rk: Ranking, T: float, cutoff: int, min_rel: int, max_rel: int) -> np.ndarray:
    """Bejeweled Player Model, static (cwl_eval's BPM-Static-T-K, K = k): the user goes on while
    the gain so far is below T and fewer than k documents are seen, C_i = [G_i < T][i < k]."""

    def continuation(gains: np.ndarray) -> np.ndarray:
        return ((np.cumsum(gains, axis=1) < T) & (_ranks() < cutoff)).astype(np.float64)

    return _expected_rate_of_gain(rk, min_rel, max_rel, continuation)


@family(
    "SDCG",
    aliases=("NDCG-k",),  # cwl_eval's name
    params={"cutoff": CWL_CUTOFF, "min_rel": MIN_REL, "max_rel": MAX_REL},
    reference="Jarvelin & Kekalainen, TOIS 2002; " + CWL_REFERENCE + " (NDCG-k)",
)
def scaled_dcg(rk: Ranking, cutoff: int, min_rel: int, max_rel: int) -> np.ndarray:
    """Scaled DCG@k (cwl_eval's NDCG-k): DCG@k divided by the DCG@k of k documents of gain 1,
    C_i = log2(i+1) / log2(i+2) for i < k, 0 from k on."""
    ranks = _ranks()
    log2 = np.log(2.0)
    ratio = (np.log(ranks + 1.0) / log2) / (np.log(ranks + 2.0) / log2)
    c = np.where(ranks < cutoff, ratio, 0.0)
    return _expected_rate_of_gain(rk, min_rel, max_rel, lambda gains: np.broadcast_to(c, gains.shape))


@family(
    "INST",
    params={"T": T_GOAL, "min_rel": MIN_REL, "max_rel": MAX_REL},
    reference="Moffat, Bailey, Scholer & Thomas, ADCS 2015; " + CWL_REFERENCE,
)
def inst(rk: Ranking, T: float, min_rel: int, max_rel: int) -> np.ndarray:
    """INST: an adaptive user who wants T of gain, C_i = ((i + T + T_i - 1) / (i + T + T_i))^2
    with T_i = T - (gain in the top i)."""

    def continuation(gains: np.ndarray) -> np.ndarray:
        ranks = _ranks()
        left = T - np.cumsum(gains, axis=1)
        return np.power((ranks + T + left - 1.0) / (ranks + T + left), 2.0)

    return _expected_rate_of_gain(rk, min_rel, max_rel, continuation)


@family(
    "INSQ",
    params={"T": T_GOAL, "min_rel": MIN_REL, "max_rel": MAX_REL},
    reference="Moffat, Scholer & Thomas, ADCS 2012; " + CWL_REFERENCE,
)
def insq(rk: Ranking, T: float, min_rel: int, max_rel: int) -> np.ndarray:
    """INSQ: C_i = ((i + 2T - 1) / (i + 2T))^2, whatever the gains seen."""
    ranks = _ranks()
    c = np.power((ranks + 2.0 * T - 1.0) / (ranks + 2.0 * T), 2.0)
    return _expected_rate_of_gain(rk, min_rel, max_rel, lambda gains: np.broadcast_to(c, gains.shape))


NERR_REFERENCE = "Azzopardi, Mackenzie & Moffat, ICTIR 2021, eq. {}; " + CWL_REFERENCE


@family(
    "NERR8",
    aliases=("NERR-EQ8",),  # cwl_eval's name
    params={"cutoff": CWL_CUTOFF, "min_rel": MIN_REL, "max_rel": MAX_REL},
    reference=NERR_REFERENCE.format(8),
)
def nerr8(rk: Ranking, cutoff: int, min_rel: int, max_rel: int) -> np.ndarray:
    """Not (but nearly) ERR, equation 8: the user stops at a document with its gain as the
    probability, and at rank k: C_i = 1 - g_i for i < k, 0 from k on."""
    ranks = _ranks()
    return _expected_rate_of_gain(rk, min_rel, max_rel, lambda gains: np.where(ranks < cutoff, 1.0 - gains, 0.0))


@family(
    "NERR9",
    aliases=("NERR-EQ9",),  # cwl_eval's name
    params={"cutoff": CWL_CUTOFF, "min_rel": MIN_REL, "max_rel": MAX_REL},
    reference=NERR_REFERENCE.format(9),
)
def nerr9(rk: Ranking, cutoff: int, min_rel: int, max_rel: int) -> np.ndarray:
    """Not (but nearly) ERR, equation 9: C_i = i/(i+1) (1 - g_i) for i < k, 0 from k on."""
    ranks = _ranks()

    def continuation(gains: np.ndarray) -> np.ndarray:
        return np.where(ranks < cutoff, (1.0 * ranks / (ranks + 1.0)) * (1.0 - gains), 0.0)

    return _expected_rate_of_gain(rk, min_rel, max_rel, continuation)


@family(
    "NERR10",
    aliases=("NERR-EQ10",),  # cwl_eval's name
    params={
        "p": Param(float, 0.9, low=0.0, high=1.0, doc="persistence, as RBP's (cwl_eval's phi)"),
        "min_rel": MIN_REL,
        "max_rel": MAX_REL,
    },
    reference=NERR_REFERENCE.format(10),
)
def nerr10(rk: Ranking, p: float, min_rel: int, max_rel: int) -> np.ndarray:
    """Not (but nearly) ERR, equation 10, RBP's patience: C_i = p (1 - g_i)."""
    return _expected_rate_of_gain(rk, min_rel, max_rel, lambda gains: p * (1.0 - gains))


@family(
    "NERR11",
    aliases=("NERR-EQ11",),  # cwl_eval's name
    params={"T": T_GOAL, "min_rel": MIN_REL, "max_rel": MAX_REL},
    reference=NERR_REFERENCE.format(11),
)
def nerr11(rk: Ranking, T: float, min_rel: int, max_rel: int) -> np.ndarray:
    """Not (but nearly) ERR, equation 11, INSQ's patience: C_i = ((i + 2T - 1) / (i + 2T))^2 (1 - g_i)."""
    ranks = _ranks()
    patience = np.power((ranks + 2.0 * T - 1.0) / (ranks + 2.0 * T), 2.0)
    return _expected_rate_of_gain(rk, min_rel, max_rel, lambda gains: patience * (1.0 - gains))
