"""Table maintenance while the job runs: compaction and VACUUM of the Delta
tables a pipeline writes, between its epochs, on the pipeline's own thread.

Every epoch adds at least one file per table per sink; a job of weeks would
leave millions. After an epoch is committed everywhere (all sinks and the
ledger), :meth:`Maintenance.after_epoch` runs AT MOST ONE task, so no epoch
waits for more than one table's work: a compaction first, then a VACUUM,
then a log cleanup, except that a task due for ``PATIENCE`` (5) epochs in a
row goes first (a pipeline of more tables than ``compact_min_files`` has a
compaction due at every epoch, and its VACUUMs still run):

- **compaction** of a table once at least ``compact_min_files`` files were
  added since its last compaction (the most overdue first): Delta's own OPTIMIZE
  (bin-packing, ``dataChange = false``: a streaming reader of the table sees
  no new data) with Delta's auto-compaction sizes (files under 64 MB are
  packed into files of up to 128 MB; bigger files are left alone, so a row is
  rewritten a few times at most). The number of files of a table is then
  bounded by its size / 64 MB + ``compact_min_files``, whatever the job's age.
  It runs on the thread that commits the pipeline's epochs, so it never
  conflicts with the pipeline's own commits; another writer's concurrent
  change is a Delta conflict like any other, the task is logged and tried
  again at the next due epoch.
- **VACUUM** of one table whose last VACUUM (by this run) is older than
  ``vacuum_interval``: Delta's VACUUM (LITE, see :meth:`Maintenance._vacuum`) with the table's own retention
  (``delta.deletedFileRetentionDuration``, 7 days unless the table says
  otherwise): files a reader or a time travel within the retention may still
  need stay. It removes what compaction and MERGE replaced; the files of
  epochs a crash left uncommitted only a full VACUUM removes (LITE when it
  can). When a table was last vacuumed is read once per run from Delta's
  ``_last_vacuum_info`` (else the table's creation), so restarts and redeploys
  do not postpone it.
- **expired log** of one table, every half of its log retention (at most once
  a minute): Delta's own cleanup of commit and checkpoint files older than
  the table's ``delta.logRetentionDuration`` (30 days unless the table says
  otherwise; ``delta.enableExpiredLogCleanup = false``: never), keeping the
  newest checkpoint before that age, so every version within the retention
  stays readable (time travel, a change-data-feed reader that lags less).
  Delta runs the same cleanup after its checkpoints, but cuts the age at
  midnight: a table that keeps an hour of log kept up to a day of commits,
  and listing a log is what every snapshot of the table costs (on a local
  file system about 11 us per file here). So the log holds at most 1.5x the
  retention's worth of commits (plus ``delta.checkpointInterval`` of them).

A reader of the tables meanwhile sees every committed epoch as before;
compaction changes files, not rows. A task's error never fails the job: it
is logged as a warning with the table and the error.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streaming_engine.checkpoint import delta_log
from streaming_engine.redact import redact_text

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger("streaming_engine.maintenance")

# Delta's auto-compaction sizes (spark.databricks.delta.autoCompact.maxFileSize
# and its minFileSize, half of it): OPTIMIZE packs files below MIN into files
# of up to MAX. Set on the pipeline's own session, read only by OPTIMIZE.
MIN_FILE_SIZE = 64 * 1024 * 1024
MAX_FILE_SIZE = 128 * 1024 * 1024
PATIENCE = 5  # epochs a due task waits for a higher-priority kind at most
# A FULL VACUUM lists the table and repartitions the listing into this many
# partitions (Delta's DeltaFileOperations.recursiveListDirs), then counts and
# joins them: at Spark's default, 10,000 tasks several times over (24-29 s on 2
# cores for a one-directory table of ~750 files). The engine's VACUUM uses 4x
# the cluster's cores (8 at least) unless the job sets it.
LISTING = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
SPARK_LISTING = "10000"


@dataclass(frozen=True)
class Policy:
    compact_min_files: int = 50  # files added since the last compaction that make one due (0: never)
    vacuum_interval_ms: int = 86_400_000  # a VACUUM at most this often per table (0: never)


@dataclass
class _Table:
    location: str
    policy: Policy
    files_after: int = 0  # the table's files after its last compaction (0: none yet in this run)
    look_at: int = 1  # the epoch (counted by this run) from which its files are worth counting
    vacuumed: float | None = None  # when it was last vacuumed (epoch s; None: not read yet)
    log_cleaned: float | None = None  # when its expired log was last removed (epoch s; None: not in this run)
    log_every_s: float = 0.0  # how often that is due (half its log retention, 60 s at least; 0: never)


class Maintenance:
    """The maintenance of one pipeline's tables (see the module's doc).

    Per epoch it counts the files of ONE table at most (a few calls into the
    JVM; the checksum file, no Spark job), so a pipeline of hundreds of tables
    pays nothing per table: a table's files are counted when enough epochs
    passed for ``compact_min_files`` of them to have been added (one file per
    epoch at least), the most overdue table first. An epoch that adds several
    files to a table makes it due sooner than it is looked at: the bound on
    its files is ``compact_min_files`` epochs' worth of files above its size."""

    def __init__(self, spark: "SparkSession", on_done: Any = None):
        self.spark = spark
        self.tables: dict[str, _Table] = {}
        self.on_done = on_done  # callable(kind, location, seconds, detail) after each task (events, tests)
        self.epochs = 0
        self._waiting: dict[str, int] = {}  # per kind: the epochs in a row it was due and another ran

    def add(self, location: str, policy: Policy) -> None:
        if policy.compact_min_files or policy.vacuum_interval_ms:
            key = location.rstrip("/")
            self.tables.setdefault(key, _Table(key, policy, look_at=len(self.tables) + 1))

    def after_epoch(self) -> str | None:
        """Run the most due task, if any; its kind ("compact"/"vacuum"/"log") or None."""
        self.epochs += 1
        kind, table = "check", None
        self._looking: _Table | None = None
        try:
            task = self._due()
            if task is None:
                return None
            kind, table = task
            began = time.monotonic()
            detail = {"compact": self._compact, "vacuum": self._vacuum, "log": self._clean_log}[kind](table)
        except Exception as e:  # noqa: BLE001 - maintenance must never fail the job (the epoch is committed)
            table = table or self._looking
            if table is not None:
                table.vacuumed = time.time() if kind == "vacuum" or table.vacuumed is None else table.vacuumed
                if kind == "log":
                    table.log_cleaned = time.time()
                table.look_at = self.epochs + max(1, table.policy.compact_min_files)  # not again at every epoch
            log.warning("table maintenance failed; tried again when due",
                        extra={"task": kind, "table": redact_text(table.location) if table else "",
                               "error": redact_text(str(e))[:500]})
            return None
        seconds = time.monotonic() - began
        log.info("table maintenance", extra={"task": kind, "table": redact_text(table.location),
                                             "seconds": round(seconds, 3), **detail})
        if self.on_done is not None:
            self.on_done(kind, table.location, seconds, detail)
        return kind

    def _due(self) -> tuple[str, _Table] | None:
        """The task to run now: compaction before VACUUM before the log
        cleanup, except that a kind due for ``PATIENCE`` epochs in a row goes
        first (a pipeline of more tables than ``compact_min_files`` has a
        compaction due at every epoch; its VACUUMs still run)."""
        tasks = {kind: find() for kind, find in (("compact", self._compact_due), ("vacuum", self._vacuum_due),
                                                 ("log", self._log_due))}
        due = [k for k in tasks if tasks[k] is not None]
        for k in tasks:
            self._waiting[k] = self._waiting.get(k, 0) + 1 if k in due else 0
        if not due:
            return None
        waited = max(due, key=lambda k: self._waiting[k])
        kind = waited if self._waiting[waited] > PATIENCE else due[0]
        self._waiting[kind] = 0
        self._looking = tasks[kind]
        return kind, tasks[kind]

    def _compact_due(self) -> _Table | None:
        looked = [t for t in self.tables.values() if t.policy.compact_min_files and t.look_at <= self.epochs]
        if not looked:
            return None
        t = self._looking = min(looked, key=lambda t: t.look_at)
        files = _files(self.spark, t.location)
        missing = t.policy.compact_min_files if files is None else t.files_after + t.policy.compact_min_files - files
        if missing <= 0:
            return t
        t.look_at = self.epochs + missing
        return None

    def _vacuum_due(self) -> _Table | None:
        now = time.time()
        unread = [t for t in self.tables.values() if t.policy.vacuum_interval_ms and t.vacuumed is None]
        if unread:  # one table's last VACUUM read per epoch (a file's time; no table yet: from now on)
            t = self._looking = unread[0]
            exists = _files(self.spark, t.location) is not None
            t.vacuumed = delta_log.last_vacuum_ms(self.spark, t.location) / 1000 if exists else now
        overdue = [t for t in self.tables.values() if t.policy.vacuum_interval_ms and t.vacuumed is not None
                   and (now - t.vacuumed) * 1000 >= t.policy.vacuum_interval_ms]
        if not overdue:
            return None
        t = self._looking = min(overdue, key=lambda t: t.vacuumed or 0.0)
        if _files(self.spark, t.location) is not None:
            return t
        t.vacuumed = now  # no table (yet)
        return None

    def _log_due(self) -> _Table | None:
        now = time.time()
        logs = [t for t in self.tables.values() if t.log_cleaned is None
                or t.log_every_s and now - t.log_cleaned >= t.log_every_s]
        if not logs:
            return None
        t = self._looking = min(logs, key=lambda t: t.log_cleaned or 0.0)
        if _files(self.spark, t.location) is not None:
            return t
        t.log_cleaned, t.log_every_s = now, 60.0  # no table (yet): look again in a minute
        return None

    def _compact(self, table: _Table) -> dict[str, Any]:
        from delta.tables import DeltaTable

        conf = self.spark.conf
        conf.set("spark.databricks.delta.optimize.minFileSize", str(MIN_FILE_SIZE))
        conf.set("spark.databricks.delta.optimize.maxFileSize", str(MAX_FILE_SIZE))
        before = _files(self.spark, table.location) or 0
        metrics = DeltaTable.forPath(self.spark, table.location).optimize().executeCompaction().collect()
        table.files_after = _files(self.spark, table.location) or 0
        table.look_at = self.epochs + table.policy.compact_min_files
        m = metrics[0]["metrics"] if metrics else None
        return {"files_before": before, "files_after": table.files_after,
                "files_removed": int(m["numFilesRemoved"]) if m else 0, "files_added": int(m["numFilesAdded"]) if m else 0}

    def _vacuum(self, table: _Table) -> dict[str, Any]:
        """VACUUM LITE: the files the log's removes name (what compaction and
        MERGE replaced), without listing the table (a full VACUUM here took
        4-6x as long on a ten-file table); a full one when the log no longer
        names them all (LITE refuses then). Files of epochs a crash left
        uncommitted are only removed by a full VACUUM."""
        where = "delta.`" + table.location.replace("`", "``") + "`"
        conf = self.spark.conf
        before = conf.get(LISTING)
        if before == SPARK_LISTING:  # Spark's default, not the job's: list with the cluster's cores
            conf.set(LISTING, str(max(8, 4 * self.spark.sparkContext.defaultParallelism)))
        try:
            try:
                self.spark.sql(f"VACUUM {where} LITE").collect()
                mode = "lite"
            except Exception as e:  # noqa: BLE001
                if "FULL" not in str(e):
                    raise
                self.spark.sql(f"VACUUM {where}").collect()
                mode = "full"
        finally:
            conf.set(LISTING, before)
        table.vacuumed = time.time()
        return {"mode": mode}

    def _clean_log(self, table: _Table) -> dict[str, Any]:
        """The table's expired log (see the module's doc; ``delta_log.clean_expired_log``)."""
        retention = delta_log.log_retention_ms(self.spark, table.location)
        removed = delta_log.clean_expired_log(self.spark, table.location) if retention is not None else 0
        table.log_cleaned = time.time()
        table.log_every_s = 0.0 if retention is None else max(60.0, retention / 2000)
        return {"log_files_removed": removed, "log_retention_s": None if retention is None else retention // 1000}


def _files(spark: "SparkSession", location: str) -> int | None:
    """The number of files in the table's newest state this driver knows (the
    one its last commit left; from the checksum file, no Spark job); None when
    there is no table yet."""
    return delta_log.file_count(spark, location)
