"""trec_eval's ``-Z``: per-topic values standardised by the per-topic statistics of a reference set
of runs (``qid measure mean stddev`` lines), as ``convert_zscores.c`` does."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from evalstore.errors import InputFormatError
from evalstore.io.cnumbers import atof
from evalstore.metrics.ranking import MIN_GEO_MEAN
from evalstore.metrics.registry import Measure

# trec_eval.h MISSING_ZSCORE_VALUE: a value with no mean and standard deviation to standardize by
MISSING_ZSCORE = -1000000.0


def read_zscores(path: str) -> dict[tuple[str, str], tuple[float, float]]:
    """trec_eval's ``-Z`` file: lines ``qid measure mean stddev`` (per-topic statistics of each
    printed measure over a reference set of runs)."""
    table: dict[tuple[str, str], tuple[float, float]] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFormatError(
            path, None, f"cannot read the z-scores file ({exc}); pass a readable text file"
        ) from None
    if not text:
        raise InputFormatError(path, None, "the z-scores file is empty; expected lines 'qid measure mean stddev'")
    for number, line in enumerate(text.splitlines(), start=1):  # a blank line is malformed too, as in trec_eval
        fields = line.split()
        # get_zscores.c reads both with atof ('nan' is a mean too); text that is no number is refused
        numbers = [atof(field) for field in fields[2:4]]
        well_formed = len(fields) == 4 and None not in numbers
        mean, stddev = (float(n) for n in numbers) if well_formed else (0.0, 0.0)  # type: ignore[arg-type]
        if not well_formed:
            raise InputFormatError(
                path,
                number,
                "expected 4 columns (qid measure mean stddev) with numbers "
                f"for the mean and standard deviation, found '{line.strip()}'",
            )
        if (fields[0], fields[1]) in table:  # trec_eval's binary search would pick one of them at random
            raise InputFormatError(
                path,
                number,
                f"statistics for topic {fields[0]} and measure {fields[1]} are "
                "given twice; keep one line per topic and measure",
            )
        table[(fields[0], fields[1])] = (mean, stddev)
    return table


def standardize(
    rows: list[tuple[str, str, Measure | None]],
    topics: list[str],
    values: dict[Measure, np.ndarray],
    zscores: dict[tuple[str, str], tuple[float, float]],
) -> dict[Measure, np.ndarray]:
    """Each printed per-topic value as a z-score, ``(value - mean) / stddev`` with the topic's and
    measure's statistics (``convert_zscores.c``): a value equal to a mean with stddev 0 is 0, and
    any other value without usable statistics is :data:`MISSING_ZSCORE`. Keyed by measure; a
    measure printed under two names is not possible (one row per trec_eval measure)."""
    converted = dict(values)
    for _, name, measure in rows:
        if measure is None or measure.spec.value_type == "str":
            continue
        raw = np.asarray(values[measure], dtype=np.float64)
        if measure.spec.summary == "gmean":  # trec_eval standardises the log it averages
            raw = np.log(np.maximum(raw, MIN_GEO_MEAN))
        converted[measure] = _standardise_column(name, topics, raw, zscores)
    return converted


def _standardise_column(
    name: str, topics: list[str], raw: np.ndarray, zscores: dict[tuple[str, str], tuple[float, float]]
) -> np.ndarray:
    found = np.array([(topic, name) in zscores for topic in topics], dtype=bool)
    stats = np.array([zscores.get((topic, name), (0.0, 1.0)) for topic in topics]).reshape(len(topics), 2)
    mean, stddev = stats[:, 0], stats[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (raw - mean) / stddev
    # convert_zscores.c: 'if (stddev)' (a NaN stddev divides), else 0 for the mean itself; a NaN
    # printed as trec_eval prints it: -nan where the value was its 0/0, nan where a statistic was nan
    z = np.where(np.isnan(z), np.where(np.isnan(raw), -np.nan, np.nan), z)
    z = np.where(stddev == 0, np.where(raw == mean, 0.0, MISSING_ZSCORE), z)
    return np.where(found, z, MISSING_ZSCORE)
