"""One pipeline = one Spark streaming query with its own checkpoint.

Every micro-batch is a checkpoint epoch and a barrier: inside ``foreachBatch``
the batch is persisted when it is read more than once (``plan.physical.persisted``:
never recomputed per table or per sink), split per table, run through the pipeline's
transform chains, routed by the shuffle-by-table stage, and committed by every
sink of the pipeline in turn (two-phase: each sink's write is idempotent for
the epoch, so a replay after a crash completes the epoch without duplicates).
Only when all sinks committed is the epoch written to the commit ledger and
``foreachBatch`` returns, after which Spark records the batch in its commit
log. This function is the single place where epochs commit.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streaming_engine.checkpoint import ledger, planned, resume
from streaming_engine.dag.logical import LogicalDag
from streaming_engine.errors import EngineError, RuntimeFailure
from streaming_engine.plan.execution import ExecutionVertex, Pipeline
from streaming_engine.plan.physical import (
    checkpoint_location, dead_letter_app_id, dead_letter_path, persisted, slug, txn_app_id, unread_metadata,
)
from streaming_engine.checkpoint.maintenance import Maintenance, Policy
from streaming_engine.redact import redact_text
from streaming_engine.runtime import faults, rows
from streaming_engine.runtime.chain import run_chain
from streaming_engine.runtime.context import CommitRecord, EpochContext, SourceContext
from streaming_engine.runtime.events import EpochCommitted, EventBus, TableMaintained
from streaming_engine.schema import Dataset

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("streaming_engine.runtime")
Frames = Mapping[str, "DataFrame"]


@dataclass
class PipelineRunner:
    spark: "SparkSession"  # a session of this pipeline's own (session-level Delta txn settings)
    dag: LogicalDag
    pipeline: Pipeline
    bus: EventBus
    ledger_path: str
    last_epoch: int = -1
    run_rows_in: int = 0  # records this run read (pipelines with dead letters), and how many went to dead letters
    run_dead_letters: int = 0
    first_dead_letter: str | None = None  # the first error of an epoch whose every record went there
    replay_epoch: int | None = None  # the batch this query run re-runs first, if any
    # (sink uid, table id) -> the newest epoch the target held when the query started
    marks: dict[tuple[str, str], int] = field(default_factory=dict)
    targets: dict[tuple[str, str], str] = field(default_factory=dict)
    # (sink uid, table id) committed by this query run (with ``marks``: the targets that exist)
    _committed: set[tuple[str, str]] = field(default_factory=set, repr=False)
    _opened: "Future[None]" = field(default=None, repr=False)  # type: ignore[assignment]  # start(): the targets read
    # drain (stop with a savepoint): the epoch in flight commits, none starts after it
    _gate: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _draining: bool = False
    _in_epoch: bool = False
    stopping: bool = False  # the supervisor is stopping the query (an epoch it interrupts fails short)
    maintains_ledger: bool = False  # one pipeline of the job maintains the job's ledger
    also_maintained: tuple[str, ...] = ()  # the job's other tables its maintainer keeps (execute(maintain=))
    _maintenance: "Maintenance | None" = field(default=None, repr=False)  # built when the query starts

    @property
    def _persisted(self) -> frozenset[str]:
        return persisted(self.dag, self.pipeline)

    @property
    def checkpoint(self) -> str:
        return checkpoint_location(self.dag, self.pipeline.key)

    @property
    def query_name(self) -> str:
        return f"{slug(self.dag.job_name)}.{slug(self.pipeline.key)}"

    # -- the query -----------------------------------------------------------
    def start(self) -> "StreamingQuery":
        """Start the query; returns once every sink's target was read (and the
        checkpoint found not behind them), or raises what that read raised,
        the query stopped. The targets are read WHILE Spark starts the query
        (its stream thread reads the checkpoint, starts the source and plans
        the first batch): one request-bound step of a second or more for a
        hundred tables on an object store, off the critical path. No epoch
        commits before the read is done (``_commit_epoch`` waits for it).

        A start that fails on a checkpoint it created (the job's first start:
        a sink cannot be opened, a target is ahead) rolls back: no epoch ran,
        so nothing was written, and the checkpoint it began (the source's
        first offsets planned) is removed, so the corrected job starts as new."""
        where = resume.progress(self.spark, self.checkpoint)
        try:
            return self._start(where)
        except BaseException:
            if where.started < 0 and where.committed < 0:
                self._roll_back()
            raise

    def _roll_back(self) -> None:
        jvm = self.spark._jvm  # type: ignore[attr-defined]
        path = jvm.org.apache.hadoop.fs.Path(self.checkpoint)
        try:
            path.getFileSystem(self.spark._jsc.hadoopConfiguration()).delete(path, True)  # type: ignore[attr-defined]
            log.warning("failed first start rolled back: removed the checkpoint it began",
                        extra={"pipeline": self.pipeline.name, "checkpoint": self.checkpoint})
        except Exception as e:  # noqa: BLE001 - the start's own error is what the user must see
            log.warning("could not remove the checkpoint of a failed first start",
                        extra={"pipeline": self.pipeline.name, "checkpoint": self.checkpoint, "error": str(e)[:300]})

    def _start(self, where: "resume.Progress") -> "StreamingQuery":
        env = self.dag.env
        self.replay_epoch = where.replay
        self._opened = _in_background(self._open_sinks, where)
        try:
            df = self._source_frame()
            planned.write(self.spark, self.checkpoint, self.planned_sources())  # what a restart plans again
            writer = (
                df.writeStream.foreachBatch(self._commit_epoch)
                .option("checkpointLocation", self.checkpoint)
                .queryName(self.query_name)
            )
            if env.streaming:
                writer = writer.trigger(processingTime=f"{env.checkpoint_interval} milliseconds")
            else:
                writer = writer.trigger(availableNow=True)
            query = writer.start()
        except BaseException:
            if self._opened.exception() is not None:  # waits; the targets' error is reported first, as it was
                self._opened.result()
            raise
        try:
            self._opened.result()
        except BaseException:
            query.stop()
            raise
        return query

    def _open_sinks(self, where: resume.Progress) -> None:
        """Read, once per query start, the epoch every sink's target holds per
        table; stop when the checkpoint is behind them (``checkpoint.resume``).
        Then start creating the job's ledger if it has none (an empty Delta
        table), so that the first epoch appends to it instead of creating it."""
        self.marks, self.targets, self._committed = {}, {}, set()
        for v in self.pipeline.vertices:
            if v.kind != "sink":
                continue
            lv = self.dag.vertex(v.members[0])
            held = lv.plugin.open(self._epoch_context(lv, where.newest), lv.schema)  # type: ignore[attr-defined]
            for table in lv.schema.tables:
                self.targets[(lv.uid, table.table_id)] = lv.plugin.target_for(table)  # type: ignore[attr-defined]
                if table.table_id in held:
                    self.marks[(lv.uid, table.table_id)] = held[table.table_id]
        if self._dead_letters:
            # the dead-letter table is a target too: a checkpoint behind it stops the run like any sink's
            from streaming_engine.checkpoint import delta_log

            path = dead_letter_path(self.dag)
            self.targets[DEAD_LETTER] = path
            state = delta_log.inspect(self.spark, path, dead_letter_app_id(self.dag, self.pipeline.key), _dead_letter_struct())
            if state.epoch >= 0:
                self.marks[DEAD_LETTER] = state.epoch
        ahead = resume.check(where, self.checkpoint, self.marks, self.targets, self.dag.env.checkpoint_behind_targets)
        if ahead:
            log.warning(
                "checkpoint behind its targets: skipping the epochs they hold (checkpoint.behind_targets = skip)",
                extra={"pipeline": self.pipeline.key, "checkpoint_epoch": where.newest, "targets": "; ".join(ahead)},
            )
        # the job's ledger, if it has none, created while the first epoch runs
        # (which waits for it before recording itself): not on the start's path
        self._ledger_created = _in_background(ledger.create, self.spark, self.ledger_path)
        self._maintenance = self._maintained()

    def _maintained(self) -> "Maintenance":
        """What this pipeline maintains between its epochs: its sinks' tables;
        the job's ledger, dead-letter table (shared by its pipelines) and the
        tables the run was given (``also_maintained``: the job history) when
        it is their maintainer (one pipeline of the job)."""
        env = self.dag.env
        own = Policy(env.maintenance_compact_min_files, int(env.maintenance_vacuum_interval_seconds * 1000))

        def done(task: str, table: str, seconds: float, detail: dict) -> None:
            self.bus.publish(TableMaintained(self.dag.job_name, self.pipeline.key, task, redact_text(table), seconds,
                                             int(detail.get("files_after", -1))))

        # kept across restarts of the query (what each table is due for); its tables added anew
        m = self._maintenance or Maintenance(self.spark, on_done=done)
        for v in self.pipeline.vertices:
            if v.kind == "sink":
                for location, policy in self.dag.vertex(v.members[0]).plugin.maintained():  # type: ignore[attr-defined]
                    m.add(location, policy)
        if self.maintains_ledger:
            m.add(self.ledger_path, own)
            m.add(ledger.rollup_path(self.ledger_path), own)  # (once a rollup made it)
            m.add(dead_letter_path(self.dag), own)  # (once it exists)
            for location in self.also_maintained:
                m.add(location, own)
        return m

    def _sources(self) -> list[ExecutionVertex]:
        return [v for v in self.pipeline.vertices if v.kind == "source"]

    @property
    def _dead_letters(self) -> bool:
        return any(self.dag.vertex(v.members[0]).plugin.dead_letters() for v in self._sources())  # type: ignore[attr-defined]

    def _write_dead_letters(self, batch: "DataFrame", batch_id: int, rows_in: int) -> "tuple[DataFrame, CommitRecord | None]":
        """Records the sources could not decode -> the job's dead-letter table,
        as epoch ``batch_id`` of the pipeline's txn id (a replay appends
        nothing twice); the batch's good rows, without the reject column. An
        epoch whose every record went there is logged as an error (the count
        and the first error); the run counts them for :meth:`finish`."""
        from pyspark.sql import functions as F

        from streaming_engine.checkpoint import delta_txn

        good = batch.where(F.col(rows.REJECT).isNull()).drop(rows.REJECT)
        dead = batch.where(F.col(rows.REJECT).isNotNull())
        path = dead_letter_path(self.dag)
        if batch_id <= self.marks.get(DEAD_LETTER, -1):
            return good, CommitRecord(DEAD_LETTER[0], DEAD_LETTER[1], path, 0, None, True)
        if dead.isEmpty():
            return good, None
        letters = dead.select(
            f"{rows.REJECT}.*", F.lit(batch_id).cast("bigint").alias("epoch"), F.lit(self.pipeline.key).alias("pipeline"),
            F.current_timestamp().alias("recorded_at"),
        )
        done = delta_txn.append_with_writer(
            self.spark, letters, delta_txn.Target(path), dead_letter_app_id(self.dag, self.pipeline.key), batch_id
        )
        faults.maybe_crash("dead_letters_written", batch_id)
        self.run_dead_letters += done.rows
        if done.rows and done.rows == rows_in:
            first = redact_text(str(dead.select(F.col(f"{rows.REJECT}.error")).first()[0]))
            self.first_dead_letter = self.first_dead_letter or first
            log.error("every record of the epoch went to the dead-letter table",
                      extra={"ctx": {"pipeline": self.pipeline.name, "epoch": batch_id, "records": done.rows,
                                     "dead_letter_table": path, "first_error": first}})
        return good, CommitRecord(DEAD_LETTER[0], DEAD_LETTER[1], path, done.rows, done.version, done.skipped)

    def combined_dataset(self) -> Dataset:
        return Dataset(tuple(t for v in self._sources() for t in v.schema.tables))

    def planned_sources(self) -> dict[str, Dataset]:
        """Each source's tables as this plan reads them (by source vertex id)."""
        return {lv.id: lv.schema for lv in (self.dag.vertex(v.members[0]) for v in self._sources())}

    def _source_frame(self) -> "DataFrame":
        """The streaming DataFrame of the pipeline's source(s), in the row envelope.

        Several sources are unioned in the multi-table envelope of all their tables.
        """
        frames = []
        unread = unread_metadata(self.dag, self.pipeline)
        for v in self._sources():
            lv = self.dag.vertex(v.members[0])
            ctx = SourceContext(
                spark=self.spark,
                job_name=self.dag.job_name,
                pipeline=self.pipeline.key,
                vertex_id=lv.id,
                uid=lv.uid,
                dataset=lv.schema,
                streaming=self.dag.env.streaming,
                parallelism=lv.parallelism,
                interval_ms=self.dag.env.checkpoint_interval,
                unread_metadata=unread,
            )
            frames.append((lv.schema, lv.plugin.read(ctx)))  # type: ignore[attr-defined]
        df = frames[0][1] if len(frames) == 1 else _union_envelopes(frames, self.combined_dataset())
        # before foreachBatch, where Spark can still prune: a batch handed to
        # foreachBatch is planned already, so what nothing reads would be
        # computed (and carried); _commit_epoch puts them back as nulls
        return rows.drop_metadata(df, unread)

    # -- one epoch -------------------------------------------------------------
    def drain(self) -> bool:
        """Start no epoch from now on (the next one, if Spark starts it, ends
        the query with ``RUNTIME.DRAINED`` before doing anything: its offsets
        are planned, nothing is written, the next run replays it). True when
        no epoch is in flight: the query can be stopped without interrupting one."""
        with self._gate:
            self._draining = True
            return not self._in_epoch

    def _commit_epoch(self, batch: "DataFrame", batch_id: int) -> None:
        with self._gate:
            if self._draining:
                raise RuntimeFailure("RUNTIME.DRAINED", {"pipeline": self.pipeline.name, "epoch": batch_id}) from None
            self._in_epoch = True
        try:
            self._commit_epoch_gated(batch, batch_id)
        finally:
            with self._gate:
                self._in_epoch = False

    def _commit_epoch_gated(self, batch: "DataFrame", batch_id: int) -> None:
        started = time.monotonic()
        self._opened.result()  # the targets' epochs (read while the query started); raises what that read raised
        batch = rows.blank_metadata(batch, unread_metadata(self.dag, self.pipeline))
        shuffled = False
        faults.maybe_crash("epoch_start", batch_id)
        cached: list["DataFrame"] = []
        try:
            if any(v.kind == "source" and v.id in self._persisted for v in self.pipeline.vertices):
                dataset = self.combined_dataset()
                if dataset.is_multi_table:
                    # shuffle by table: each table's rows in ONE of a few cached
                    # partitions, in one run (sorted). A per-table read is then
                    # a few tasks that skip the other tables' cached batches by
                    # their column stats, however many partitions the source
                    # has (FakeSource: one or more per table): never tables x
                    # source partitions tasks.
                    k = min(len(dataset.tables), _shuffle_partitions(self.spark))
                    batch = batch.repartition(k, rows.TABLE).sortWithinPartitions(rows.TABLE)
                    shuffled = True
                batch = batch.persist()
                cached.append(batch)
            commits: list[CommitRecord] = []
            # the rows per table of a multi-table batch, counted by the job that builds its cache: a table
            # without rows in this epoch costs its sinks nothing (no transaction, no commit)
            present = ({r[0]: r[1] for r in batch.groupBy(rows.TABLE).count().collect()} if shuffled else None)
            if self._dead_letters:
                # rows in (= rows to the sinks + dead letters), counted on the cache it builds
                rows_in = sum(present.values()) if present is not None else batch.count()
                commits.append(CommitRecord(ROWS_IN[0], ROWS_IN[1], "", rows_in, None, False))
                self.run_rows_in += rows_in
                batch, letters = self._write_dead_letters(batch, batch_id, rows_in)
                commits.extend([letters] if letters is not None else [])
            outputs = self._run_vertices(batch, batch_id, cached, shuffled, built=self._dead_letters or shuffled)
            commits += self._commit_sinks(outputs, batch_id, batch if shuffled else None, present)
            faults.maybe_crash("before_ledger", batch_id)
            self._ledger_created.result()
            ledger.record(
                self.spark, self.ledger_path, self.dag.job_name, self.pipeline.key, batch_id, commits,
                replay=batch_id == self.replay_epoch,
                before_commit=lambda: faults.maybe_crash("ledger_files_written", batch_id),
            )
            faults.maybe_crash("after_ledger", batch_id)
        except EngineError:
            raise
        except Exception as e:
            if self.stopping:
                # interrupted by query.stop(): a SHORT error, nothing chained. Spark matches the text
                # of foreachBatch's error against a regex that recurses per character (StreamExecution.
                # isInterruptionException): on a Py4JJavaError's several KB with the Java stack it ran
                # for minutes (a stop took 5 min under load) or overflowed the stack. The epoch is
                # replayed by the next run, exactly once.
                raise RuntimeFailure("RUNTIME.FAILED", {"detail": f"{self.pipeline.name}, epoch {batch_id}: "
                                                                  "interrupted by a stop"}) from None
            raise RuntimeFailure(
                "RUNTIME.FAILED",
                {"detail": f"job {self.dag.job_name}, {self.pipeline.name}, epoch {batch_id}: {_short(e)}"},
            ) from e
        finally:
            for df in cached:
                df.unpersist()
        self.last_epoch = batch_id
        self.bus.publish(
            EpochCommitted(self.dag.job_name, self.pipeline.key, batch_id, tuple(commits), time.monotonic() - started)
        )
        if self._maintenance is not None:
            self._maintenance.after_epoch()  # at most one table's compaction or VACUUM; never raises
        self._roll_up_ledger(batch_id)

    def _roll_up_ledger(self, batch_id: int) -> None:
        """Every ``ledger.keep.epochs`` epochs, fold this pipeline's ledger rows
        older than the newest that many into the rollup table (ledger.roll_up);
        like maintenance, never fails the committed epoch."""
        keep = self.dag.env.ledger_keep_epochs
        done = batch_id + 1
        if not keep or done % keep or done < 2 * keep:
            return
        began = time.monotonic()
        try:
            folded = ledger.roll_up(self.spark, self.ledger_path, self.pipeline.key, done - keep)
        except Exception as e:  # noqa: BLE001 - tried again in `keep` epochs
            log.warning("ledger rollup failed; tried again later",
                        extra={"ledger": redact_text(self.ledger_path), "error": redact_text(str(e))[:500]})
            return
        self.bus.publish(TableMaintained(self.dag.job_name, self.pipeline.key, "rollup", redact_text(self.ledger_path),
                                         time.monotonic() - began))
        log.info("ledger rolled up", extra={"ledger": redact_text(self.ledger_path), "epochs_folded": folded,
                                            "before_epoch": done - keep})

    def _run_vertices(
        self, base: "DataFrame", batch_id: int, cached: list["DataFrame"], shuffled: bool = False, built: bool = False
    ) -> dict[str, Frames]:
        """Frames produced by every non-sink vertex, in topological order.

        After the shuffle by table each table's rows sit in ONE partition: its
        frame is coalesced to one, so a per-table job is one task (not one
        per shuffle partition, the others empty; a writer's empty first task
        would still leave an empty file). The per-table frames are built when
        first used (a sink writing the batch itself never asks for them)."""
        # a persisted batch is built in ONE job before its per-table frames
        # are: otherwise every per-table read planned before the cache exists
        # (adaptive execution's table-cache stages) starts a job that builds
        # or waits for it, 100 tables made 100 concurrent stages over the same
        # blocks. A sink writing the envelope itself (one job) builds it first.
        # (``cached[0]``: the persisted source batch; ``base`` may be its good rows after the dead letters;
        # ``built``: counted already)
        materialize = cached[0].count if cached and not built else None
        per_table = rows.lazy_split(base, self.combined_dataset(), coalesce=shuffled, before=materialize)
        outputs: dict[str, Frames] = {}
        for v in self._topological():
            if v.kind == "source":
                outputs[v.id] = per_table.subset(v.schema.table_ids)
            elif v.kind == "transform_chain":
                members = [self.dag.vertex(m) for m in v.members]
                outputs[v.id] = run_chain(self.spark, self.dag, members, self._inputs(v, outputs), batch_id)
            elif v.kind == "shuffle":
                outputs[v.id] = self._inputs(v, outputs)
            if v.kind == "transform_chain" and v.id in self._persisted:
                # read more than once: compute once (Python stages must not rerun per reader)
                kept = {t: df.persist() for t, df in outputs[v.id].items()}
                cached.extend(kept.values())
                outputs[v.id] = kept
        return outputs

    def _reads_source(self, v: ExecutionVertex) -> bool:
        """The sink's input is the source batch itself (directly or through the shuffle)."""
        srcs = [self._vertex(e.src) for e in self.pipeline.edges if e.dst == v.id]
        while len(srcs) == 1 and srcs[0].kind == "shuffle":
            srcs = [self._vertex(e.src) for e in self.pipeline.edges if e.dst == srcs[0].id]
        return len(srcs) == 1 and srcs[0].kind == "source"

    def _epoch_context(self, lv, batch_id: int, envelope_of=None) -> EpochContext:
        return EpochContext(
            spark=self.spark,
            job_name=self.dag.job_name,
            pipeline=self.pipeline.key,
            sink_uid=lv.uid,
            vertex_id=lv.id,
            batch_id=batch_id,
            txn_app_id=lambda table, uid=lv.uid: txn_app_id(self.dag, self.pipeline.key, uid, table),
            commit_parallelism=self.dag.env.commit_parallelism,
            log_parallelism=self.dag.env.commit_log_parallelism,
            extras={"checkpoint_location": self.checkpoint},
            envelope_of=envelope_of,
        )

    def finish(self) -> None:
        """The query ended without error: the ledger's creation has ended (a
        run without any epoch, e.g. no new input, does not end while it still
        commits), and every sink checks the whole run."""
        try:
            self._ledger_created.result()
        except Exception as e:
            raise RuntimeFailure(
                "RUNTIME.FAILED",
                {"detail": f"job {self.dag.job_name}, {self.pipeline.name}: creating its commit ledger: {_short(e)}"},
            ) from e
        for v in self.pipeline.vertices:
            if v.kind == "sink":
                lv = self.dag.vertex(v.members[0])
                lv.plugin.finish(self._epoch_context(lv, self.last_epoch), lv.schema)  # type: ignore[attr-defined]
        if self.run_rows_in and self.run_dead_letters == self.run_rows_in and not self.dag.env.dead_letter_allow_all:
            raise RuntimeFailure("DATA.ALL_DEAD_LETTERS", {
                "pipeline": self.pipeline.name, "count": self.run_dead_letters, "path": dead_letter_path(self.dag),
                "error": self.first_dead_letter or "?"})

    def _commit_sinks(
        self, outputs: dict[str, Frames], batch_id: int, grouped: "DataFrame | None" = None,
        present: "Mapping[str, int] | None" = None,
    ) -> list[CommitRecord]:
        """``grouped``: the multi-table source batch, grouped by table and
        persisted (the shuffle by table), handed to sinks reading it untouched.
        ``present``: its tables with rows; a sink reading it untouched is not
        given the others, except a table its target does not hold yet (its
        first epoch creates it, as a run over an empty table would)."""
        commits: list[CommitRecord] = []
        envelope = None
        if grouped is not None:
            cols = grouped.columns
            envelope = (grouped, {
                t: tuple(cols.index(slot) for slot in slots)
                for t, slots in rows.layout(self.combined_dataset()).columns.items()
            })
        for v in self.pipeline.vertices:
            if v.kind != "sink":
                continue
            lv = self.dag.vertex(v.members[0])
            frames = self._inputs(v, outputs)
            if present is not None and self._reads_source(v):
                frames = rows.subset(frames, [t for t in frames if t in present or not self._exists(lv.uid, t)])
            # tables whose target holds this epoch already (a replay after a
            # crash, or checkpoint.behind_targets = skip): not written again
            held = [t for t in frames if batch_id <= self.marks.get((lv.uid, t), -1)]
            commits.extend(CommitRecord(lv.uid, t, self.targets.get((lv.uid, t), t), 0, None, True) for t in held)
            todo = rows.subset(frames, [t for t in frames if t not in held])
            faults.maybe_crash("before_sink", batch_id, lv.uid)
            if todo:
                if self._reads_source(v):
                    envelope_of = (lambda: envelope) if envelope is not None else None
                else:  # the frames transforms made of the shuffled batch: one envelope, when a sink asks
                    envelope_of = functools.partial(_frames_envelope, todo, lv.schema) if grouped is not None else None
                ctx = self._epoch_context(lv, batch_id, envelope_of)
                commits.extend(lv.plugin.write(ctx, todo, lv.schema))  # type: ignore[attr-defined]
            faults.maybe_crash("after_sink", batch_id, lv.uid)
        self._committed.update((c.sink, c.table) for c in commits)
        return commits

    def _exists(self, uid: str, table: str) -> bool:
        """The sink's target of ``table`` holds an epoch (at the query's start, or committed since)."""
        return self.marks.get((uid, table), -1) >= 0 or (uid, table) in self._committed

    def _inputs(self, v: ExecutionVertex, outputs: dict[str, Frames]) -> Frames:
        sources = [outputs[e.src] for e in self.pipeline.edges if e.dst == v.id]
        if len(sources) == 1:
            return sources[0]
        merged: dict[str, "DataFrame"] = {}
        for frames in sources:
            merged.update(frames)
        return merged

    def _vertex(self, vid: str) -> ExecutionVertex:
        return next(x for x in self.pipeline.vertices if x.id == vid)

    def _topological(self) -> list[ExecutionVertex]:
        p = self.pipeline
        indeg = {v.id: 0 for v in p.vertices}
        for e in p.edges:
            indeg[e.dst] += 1
        ready = [v for v in p.vertices if indeg[v.id] == 0]
        order = []
        while ready:
            v = ready.pop(0)
            order.append(v)
            for e in p.edges:
                if e.src == v.id:
                    indeg[e.dst] -= 1
                    if indeg[e.dst] == 0:
                        ready.append(self._vertex(e.dst))
        return order


def _frames_envelope(
    frames: "Mapping[str, DataFrame]", dataset: Dataset
) -> "tuple[DataFrame, dict[str, tuple[int, ...]]] | None":
    """Per-table frames (the envelope's metadata, then the table's columns) of
    a batch shuffled by table, in ONE multi-table envelope of ``dataset``'s
    tables, with the ordinals of each table's columns (``EpochContext.envelope``).
    Each row's table id is the frame's (a transform may have renamed the
    table), and each frame stays one partition (a transform that shuffled is
    brought back to one): a table's rows in one partition, as the shuffle by
    table leaves them. None for fewer than two tables (nothing to share)."""
    tables = [t for t in dataset.tables if t.table_id in frames]
    if len(tables) < 2:
        return None
    combined = Dataset(tuple(tables))
    target = rows.layout(combined)
    batch = rows.join_tables([frames[t.table_id] for t in tables], combined, target)
    cols = batch.columns
    return batch, {t: tuple(cols.index(slot) for slot in slots) for t, slots in target.columns.items()}


def _union_envelopes(frames: list[tuple[Dataset, "DataFrame"]], combined: Dataset) -> "DataFrame":
    """Bring each source's frame into the multi-table envelope of ``combined`` and union them.

    A combined slot takes, per table of a source, the column the table keeps
    there: from the source's own slot (multi-table source) or column.
    """
    from pyspark.sql import functions as F

    target = rows.layout(combined)
    out = None
    for dataset, df in frames:
        own = rows.layout(dataset).columns if dataset.is_multi_table else None
        per_slot: dict[str, list[tuple[str, str]]] = {}  # combined slot -> [(table id, source column)]
        for t in dataset.tables:
            sources = own[t.table_id] if own is not None else tuple(f"`{c}`" for c in t.names)
            for slot, src in zip(target.columns[t.table_id], sources):
                per_slot.setdefault(slot, []).append((t.table_id, src))
        cols = [F.col(c) for c in rows.META]
        for slot, ddl in target.slots:
            found = per_slot.get(slot, [])
            if not found:
                expr = F.lit(None).cast(ddl)
            elif own is None:
                expr = F.col(found[0][1])
            else:
                expr = F.lit(None).cast(ddl)
                for table_id, src in found:
                    expr = F.when(F.col(rows.TABLE) == table_id, F.col(src)).otherwise(expr)
            cols.append(expr.alias(slot))
        if any(rows.REJECT in f.columns for _, f in frames):
            cols.append(F.col(rows.REJECT) if rows.REJECT in df.columns else F.lit(None).cast(f"struct<{rows.REJECT_DDL}>").alias(rows.REJECT))
        framed = df.select(*cols)
        out = framed if out is None else out.unionByName(framed)
    assert out is not None
    return out


DEAD_LETTER = ("_dead_letter", "*")  # (sink uid, table) of the dead-letter table in marks, targets and the ledger
ROWS_IN = ("_rows_in", "*")  # (sink uid, table) of an epoch's input rows in the ledger (pipelines with dead letters)


def _dead_letter_struct() -> "object":
    from pyspark.sql.types import StructType, _parse_datatype_string

    dt = _parse_datatype_string(f"{rows.REJECT_DDL}, epoch bigint, pipeline string, recorded_at timestamp")
    assert isinstance(dt, StructType)
    return dt


def _shuffle_partitions(spark: "SparkSession") -> int:
    try:
        return max(1, int(spark.conf.get("spark.sql.shuffle.partitions") or 4))
    except (ValueError, TypeError):
        return 4


def _short(e: Exception) -> str:
    """The most telling line of an error: for a Python worker or JVM failure,
    the deepest ``SomeError: message`` line rather than Spark's generic first
    line (JVM causes come as ``: x.YError: ...`` or ``Caused by: ...``)."""
    import re

    lines = []
    for ln in str(e).strip().splitlines():
        ln = re.sub(r"^(\s*(Caused by:|:)\s*)+", "", ln).strip()
        if ln and not ln.startswith("at "):
            lines.append(ln)
    pattern = re.compile(r"^[A-Za-z_.$]*(Error|Exception|Failure)\b[^:]*:\s*\S")
    errors = [ln for ln in lines if pattern.match(ln) and "Py4JJavaError" not in ln]
    best = errors[-1] if errors else (lines[0] if lines else "")
    state = _sql_state(e)
    tail = f" (SQLSTATE: {state})" if state and "SQLSTATE" not in best else ""
    return f"{type(e).__name__}: {best}{tail}"


def _sql_state(e: BaseException) -> str | None:
    """The SQLSTATE of a Spark or Delta error, from pyspark's exception or the
    Java exception behind a py4j error (its first cause that has one): it says
    whether a restart can heal it (``restart.retriable``)."""
    get = getattr(e, "getSqlState", None)
    if callable(get):
        try:
            return get() or None
        except Exception:  # noqa: BLE001 - no state is an answer
            return None
    j = getattr(e, "java_exception", None)
    for _ in range(8):
        if j is None:
            return None
        try:
            state = j.getSqlState()
            if state:
                return str(state)
        except Exception:  # noqa: BLE001 - not a SparkThrowable: look at its cause
            pass
        try:
            j = j.getCause()
        except Exception:  # noqa: BLE001
            return None
    return None


def _in_background(fn, *args) -> "Future[Any]":
    """``fn(*args)`` on a daemon thread of its own; its outcome as a future."""
    done: Future[Any] = Future()

    def run() -> None:
        try:
            done.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits
            done.set_exception(e)

    threading.Thread(target=run, name=f"background-{fn.__name__}", daemon=True).start()
    return done
