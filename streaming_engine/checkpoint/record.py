"""What one sink did with one table in one epoch: a row of the commit ledger."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CommitRecord:
    """What one sink did with one table in one epoch (a row of the commit ledger)."""

    sink: str  # sink uid
    table: str
    target: str  # path or table name written
    rows: int
    version: int | None = None  # Delta version committed (None: skipped on replay, or not Delta)
    skipped: bool = False  # the epoch was already committed (idempotent replay)
    # Delta commits: seconds from the start of the table's write to its commit
    # (metrics only: the ledger does not store it); None where not measured
    seconds: float | None = None
