"""Bradley-Terry ratings of systems from pairwise outcomes, with bootstrap intervals over topics.

A system i has a strength s_i; it beats j with probability 1 / (1 + exp(-(s_i - s_j))). The
ratings maximise the likelihood of the outcomes, a tie counting half a win to each side (as
Chatbot Arena counts ties), under a weak Gaussian prior ``alpha / 2 * sum(s^2)`` that keeps an
undefeated system's rating finite; they are centred on 0, so a rating is log-odds against the
average system.

Fitted here with scipy (Newton-CG on the exact gradient and Hessian) rather than with choix: choix takes
unweighted (winner, loser) pairs, and a tie is half a win, a weight it cannot take; the
likelihood and its gradient are a few lines, and scipy is a dependency already. The tests hold the
fit equal to Hunter's (2004) minorisation-maximisation algorithm, written apart, and to the
two-system closed form.

The bootstrap resamples topics with replacement (a topic's outcomes go together: the topic is the
unit a track samples) and refits; the interval is the percentile interval. Its seed is returned
with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize

PRIOR = 0.01  # alpha: a prior this weak moves ratings far less than their intervals are wide


def fit(wins: NDArray[np.float64], *, alpha: float = PRIOR) -> NDArray[np.float64]:
    """The ratings from ``wins[i, j]``: how often i beat j (ties as half a win each way), centred
    on 0. ``alpha`` 0 is the plain maximum likelihood, which is finite only when every system has
    both won and lost along a connected comparison graph."""
    wins = np.asarray(wins, dtype=np.float64)
    n = wins.shape[0]
    if n == 0:
        return np.zeros(0)
    games = wins + wins.T

    def objective(s: NDArray[np.float64]) -> float:
        # -log P(i beats j) = log(1 + exp(-(s_i - s_j))), computed without overflow
        return float(np.sum(wins * np.logaddexp(0.0, -(s[:, None] - s[None, :])))) + alpha / 2 * float(s @ s)

    def gradient(s: NDArray[np.float64]) -> NDArray[np.float64]:
        p = 1.0 / (1.0 + np.exp(-(s[:, None] - s[None, :])))  # P(i beats j)
        return np.asarray(np.sum(games * p - wins, axis=1) + alpha * s)

    def hessian(s: NDArray[np.float64]) -> NDArray[np.float64]:
        p = 1.0 / (1.0 + np.exp(-(s[:, None] - s[None, :])))
        weight = games * p * (1.0 - p)
        return np.asarray(np.diag(weight.sum(axis=1)) - weight + alpha * np.eye(n))

    # Newton-CG with the exact Hessian: a handful of iterations to 1e-12, which the bootstrap's
    # thousand fits need (L-BFGS took ten times as long to the same precision)
    found = minimize(objective, np.zeros(n), jac=gradient, hess=hessian, method="Newton-CG", tol=1e-12)
    ratings = np.asarray(found.x, dtype=np.float64)
    return ratings - ratings.mean()


@dataclass(frozen=True)
class Intervals:
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    samples: int  # bootstrap samples drawn
    seed: int
    confidence: float


def bootstrap(
    per_topic: NDArray[np.float64],
    *,
    samples: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
    alpha: float = PRIOR,
) -> Intervals:
    """Percentile intervals of the ratings, resampling ``per_topic[t]`` (topic t's wins matrix)
    with replacement ``samples`` times with ``numpy.random.default_rng(seed)``."""
    per_topic = np.asarray(per_topic, dtype=np.float64)
    topics, n = per_topic.shape[0], per_topic.shape[1]
    rng = np.random.default_rng(seed)
    drawn = np.empty((samples, n))
    for b in range(samples):
        chosen = rng.integers(0, topics, size=topics)
        drawn[b] = fit(per_topic[chosen].sum(axis=0), alpha=alpha)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(drawn, [tail, 100 - tail], axis=0)
    return Intervals(low, high, samples, seed, confidence)
