"""Where a (re)starting query stands: its Spark checkpoint against its targets.

One rule for every sink that commits exactly once: when a pipeline's query
starts, each sink reports per table the newest epoch its target already holds
for the sink's transaction id (``Sink.open``). The runtime then never writes
an epoch at or below that mark for that table, whatever the write path.

Spark re-runs at most ONE epoch after a crash: the newest batch in the
checkpoint's offset log without a commit-log entry. A target may hold that
epoch (it committed before the crash, Spark's commit log not yet), but never a
later one. A target ahead of the checkpoint means the checkpoint was lost,
reset or moved: the source would start again and every epoch be appended a
second time (or, skipped blindly, new data lost). That stops the run with
:class:`CheckpointBehind`, unless the job says deliberately
``checkpoint.behind_targets = skip``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from streaming_engine.errors import CheckpointError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Progress:
    """Spark's checkpoint of one query: its newest committed and started batch (-1: none)."""

    committed: int
    started: int

    @property
    def replay(self) -> int | None:
        """The batch the restarted query runs again first, if any."""
        return self.started if self.started > self.committed else None

    @property
    def newest(self) -> int:
        """The newest epoch any sink may hold."""
        return max(self.committed, self.started)


def progress(spark: "SparkSession", checkpoint: str) -> Progress:
    """Read the offset and commit logs of a query checkpoint (Hadoop FS, any scheme)."""
    from py4j.protocol import Py4JJavaError

    jvm = spark._jvm  # type: ignore[attr-defined]
    root = jvm.org.apache.hadoop.fs.Path(checkpoint)
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]

    missing = jvm.java.lang.Class.forName("java.io.FileNotFoundException")

    def newest(name: str) -> int:
        # one listing, no existence probe first: on S3 a probe is two requests
        try:
            listing = fs.listStatus(jvm.org.apache.hadoop.fs.Path(root, name))
        except Py4JJavaError as e:
            if missing.isInstance(e.java_exception):  # a file system may throw a subclass
                return -1
            raise
        ids = [int(st.getPath().getName()) for st in listing if st.getPath().getName().isdigit()]
        return max(ids, default=-1)

    return Progress(committed=newest("commits"), started=newest("offsets"))


def check(
    where: Progress,
    checkpoint: str,
    marks: Mapping[tuple[str, str], int],
    targets: Mapping[tuple[str, str], str],
    on_behind: str,
) -> list[str]:
    """Raise ``CHECKPOINT.BEHIND_TARGETS`` when a target holds an epoch the
    checkpoint never started (``on_behind = "fail"``); returns those targets
    as text (for the log when ``on_behind = "skip"``). ``marks`` and
    ``targets``: (sink uid, table id) -> epoch held / where."""
    ahead = [
        f"sink {sink} table {table} ({targets.get((sink, table), '?')}) holds epoch {epoch}"
        for (sink, table), epoch in sorted(marks.items())
        if epoch > where.newest
    ]
    if ahead and on_behind != "skip":
        raise CheckpointError(
            "CHECKPOINT.BEHIND_TARGETS", {"checkpoint": checkpoint, "epoch": where.newest, "targets": "; ".join(ahead)}
        )
    return ahead
