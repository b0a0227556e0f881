"""Where the part of an evaluation that grows with its inputs runs: the local engine (in this
process, or in the database for a stored run), DuckDB (out of core, spilling to disk) or Spark.

Every backend hands the local engine's kernels the same small tables (a run's judged ranks, a
prediction set's pair and confusion counts), so the numbers do not depend on the choice; a job
records which one computed it (``evaluations.backend``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from evalstore.errors import InvalidParameterError

BACKENDS = ("local", "duckdb", "spark")


@dataclass(frozen=True)
class Backend:
    """A backend and its settings: DuckDB's ``memory_limit`` (DuckDB's syntax, '2GB') and
    ``temp_directory`` (where it spills); Spark's ``master`` URL (``local[2]``,
    ``spark://host:7077``) and ``staging``, the folder the stored rows are written to as Parquet
    for Spark to read (on a cluster, one every executor reads: a shared file system)."""

    name: str = "local"
    memory_limit: str | None = None
    temp_directory: str | None = None
    master: str | None = None
    staging: str | None = None

    def __post_init__(self) -> None:
        if self.name not in BACKENDS:
            raise InvalidParameterError(f"--backend must be one of {', '.join(BACKENDS)}; got '{self.name}'.")
        given = {
            "duckdb": ("--memory-limit", self.memory_limit, "--temp-directory", self.temp_directory),
            "spark": ("--spark-master", self.master, "--spark-staging", self.staging),
        }
        for owner, (flag, value, other_flag, other) in given.items():
            for name, setting in ((flag, value), (other_flag, other)):
                if setting is not None and self.name != owner:
                    raise InvalidParameterError(
                        f"{name} is a setting of --backend {owner}; this is --backend {self.name}."
                    )

    @property
    def local(self) -> bool:
        return self.name == "local"

    def stored(self) -> dict[str, Any] | None:
        """As ``evaluations.backend`` keeps it (None: local)."""
        if self.local:
            return None
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_stored(cls, stored: dict[str, Any] | None) -> Backend:
        return cls(**stored) if stored else cls()


LOCAL = Backend()
