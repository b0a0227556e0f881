"""Prediction-powered inference of a system's mean score (Oosterhuis, Jagerman, Qin, Wang &
Bendersky 2024, "Reliable confidence intervals for information retrieval evaluation using
generative A.I.", arXiv 2407.02464; Angelopoulos et al. 2023; Boyeau et al. 2024): with ``N``
topics judged by an LLM and ``n`` of them judged by people too, the mean is the LLM's mean over the
``N`` topics corrected by the mean difference people make on the ``n``:

    theta = mean_N(M_llm) + mean_n(M_human - M_llm)
    half-width = z * sqrt(var_N(M_llm) / N + var_n(M_human - M_llm) / n)

(sample variances, ``z`` the normal quantile of the confidence). That half-width holds when the
``n`` topics are apart from the ``N`` (PPI's labelled and unlabelled sets); here the ``n`` are
among the ``N`` (people judge some of the topics the LLM judged), so mean_N(M_llm) and the
correction share those topics and their covariance counts too:

    half-width = z * sqrt(var_N(M_llm) / N + var_n(M_human - M_llm) / n + 2 cov_n(M_llm, M_human - M_llm) / N)

Without that term a judge that compresses the scale (its error grows with the score) gets an
interval that covers the true mean 0.87-0.91 of the time at 95% (measured by simulation,
tests/judges/test_prediction_powered.py); with it, at its nominal rate. Both half-widths are
reported (``half_width``, ``half_width_independent``); the interval is the first. When the
``n`` topics are all the ``N``, it is the classical interval of people's mean. The interval accounts for the
judge's error: a judge that is off by a constant is corrected exactly, and one whose error varies
from topic to topic widens the interval. It is valid when the ``n`` topics are a random sample of
the ``N`` (people judging the topics they chose, e.g. the hard ones, biases the correction).
Beside it, the classical interval from the ``n`` human-judged topics alone, which PPI should
narrow when the judge is good.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PredictionPowered:
    """One system's prediction-powered mean and interval, with the figures behind them."""

    mean: float  # theta
    low: float
    high: float
    half_width: float  # with the covariance of the shared topics (the interval's)
    half_width_independent: float  # the formula as stated for separate topic sets
    llm_mean: float  # mean_N(M_llm): what the judge alone says
    correction: float  # mean_n(M_human - M_llm): what people add to it
    human_mean: float  # mean_n(M_human): the human-judged topics alone
    human_half_width: float  # the classical interval's half-width, from the n topics alone
    llm_topics: int  # N
    human_topics: int  # n
    confidence: float


def prediction_powered(
    llm_all: np.ndarray, human: np.ndarray, llm_on_human: np.ndarray, *, confidence: float = 0.95
) -> list[PredictionPowered]:
    """Per system (a row): ``llm_all`` is systems x N (the LLM's scores on every topic it judges),
    ``human`` and ``llm_on_human`` systems x n (people's and the LLM's scores on the topics people
    judge, in the same order). ``n`` must be at least 2 (a variance)."""
    from scipy import stats

    if not 0 < confidence < 1:
        raise ValueError(f"the confidence is between 0 and 1; not {confidence:g}")
    llm_all = np.atleast_2d(np.asarray(llm_all, dtype=float))
    human = np.atleast_2d(np.asarray(human, dtype=float))
    llm_on_human = np.atleast_2d(np.asarray(llm_on_human, dtype=float))
    if human.shape != llm_on_human.shape or human.shape[0] != llm_all.shape[0]:
        raise ValueError("the human and LLM scores of the human-judged topics must be of the same systems and topics")
    big, small = llm_all.shape[1], human.shape[1]
    if small < 2 or big < 2:
        raise ValueError(f"prediction-powered inference needs 2 or more topics of each; {big} and {small} here")
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    delta = human - llm_on_human
    llm_mean = llm_all.mean(axis=1)
    correction = delta.mean(axis=1)
    theta = llm_mean + correction
    independent = llm_all.var(axis=1, ddof=1) / big + delta.var(axis=1, ddof=1) / small
    centred = (llm_on_human - llm_on_human.mean(axis=1, keepdims=True)) * (delta - correction[:, None])
    covariance = centred.sum(axis=1) / (small - 1)
    # a negative total can only come from estimates off by sampling error: no width rather than a nan
    half = z * np.sqrt(np.maximum(independent + 2 * covariance / big, 0.0))
    half_independent = z * np.sqrt(independent)
    human_half = z * np.sqrt(human.var(axis=1, ddof=1) / small)
    return [
        PredictionPowered(
            float(theta[i]),
            float(theta[i] - half[i]),
            float(theta[i] + half[i]),
            float(half[i]),
            float(half_independent[i]),
            float(llm_mean[i]),
            float(correction[i]),
            float(human[i].mean()),
            float(human_half[i]),
            big,
            small,
            confidence,
        )
        for i in range(llm_all.shape[0])
    ]
