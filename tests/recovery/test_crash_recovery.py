"""Exactly-once under crashes: SIGKILL the driver at every named fault point
and at random moments, restart the same job, and compare every output table,
epoch by epoch, with what the test's OWN input files say it must hold.

The input: the test writes two tables of a CDC-like stream as json files
(``shop.orders`` and ``shop.users``: id, op = +I/-U/+U/-D, a per-table
sequence number, values), two files per table per epoch. The job reads them
with two LocalFile sources (``max_files_per_trigger = 2``, files ordered by
their modification times, which the test sets), so epoch ``k`` is exactly
files ``2k`` and ``2k+1`` of each table and every batch spans four files. A
Python transform (``tests/recovery/cdc_kinds.py``) turns the ``op`` column
into the row kind. Two Delta sinks take both tables: an upsert sink keyed by
id with ``sequence_column = seq`` (``state/``) and an append sink, the change
log (``log/``), so every epoch commits four tables.

The kills:

1. targeted: every fault point of ``runtime/faults.py`` (``epoch_start``,
   ``before_sink``/``after_sink`` for both sinks, ``sink_files_written``,
   ``sink_table_committed`` for both sinks, ``before_ledger``,
   ``ledger_files_written``, ``after_ledger``), planned so that each fires
   at a point the previous kill left in a known state; after each, the test
   checks the run died by SIGKILL and that the tables, the ledger and Spark's
   checkpoint are in the state that point implies (which tables hold the
   epoch, an uncommitted data or ledger file on disk, ...);
2. random: the test waits until the restarted run logs that its query started
   (the JVM is up, the replayed or next epoch is under way) and SIGKILLs the
   driver's process group after a random delay within about one epoch. When
   a run finishes before the kill, the test writes two more epochs of input
   and goes on. CI makes 19 kills in all (every targeted one, 2 random); ``STREAMING_ENGINE_SOAK=<kills>``
   makes that many (``STREAMING_ENGINE_SOAK=200 STREAMING_ENGINE_TEST_WORKERS=0
   ./scripts/test.sh tests/recovery -s``), ``STREAMING_ENGINE_SOAK_SEED`` picks the delays.

After the last run finishes the test checks, from the files on disk:

- the ledger table (read with Spark) has every epoch exactly once for each
  (sink, table), and the rows it records for the change log are the epoch's;
- each target's Delta log has each epoch's txn in exactly one commit, under
  one app id, in epoch order;
- the change-log tables equal the input multiset, and each epoch's commit
  adds exactly that epoch's rows;
- the upsert tables, read at the version of each epoch (time travel), equal
  the state the test computes from its input after that epoch: a lost or
  doubled intermediate change shows even when a later change hides it.
"""

from __future__ import annotations

import glob
import json
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.jvm import C1_ONLY_OPTS

pytestmark = [pytest.mark.spark, pytest.mark.soak]

ROOT = Path(__file__).resolve().parents[2]
JOB_NAME = "crash_job"
JOB = """
env { job.name = crash_job, checkpoint.dir = "${work}/ck", job.retry.times = 0,
      spark.driver.extraJavaOptions = "@JVM@" }
source {
  LocalFile {
    plugin_output = orders_in, path = "${work}/in/orders", file_format_type = json, max_files_per_trigger = 2
    schema = { table = "shop.orders", fields { id = bigint, op = string, seq = bigint, amount = double, note = string },
               primaryKey { name = pk, columnNames = [id] } }
  }
  LocalFile {
    plugin_output = users_in, path = "${work}/in/users", file_format_type = json, max_files_per_trigger = 2
    schema = { table = "shop.users", fields { id = bigint, op = string, seq = bigint, name = string },
               primaryKey { name = pk, columnNames = [id] } }
  }
}
transform {
  Python { plugin_input = orders_in, plugin_output = orders, function = "tests.recovery.cdc_kinds:kind_from_op", api = arrow }
  Python { plugin_input = users_in, plugin_output = users, function = "tests.recovery.cdc_kinds:kind_from_op", api = arrow }
}
sink {
  Delta { plugin_input = [orders, users], path = "${work}/state/${table_name}", save_mode = upsert, sequence_column = seq }
  Delta { plugin_input = [orders, users], path = "${work}/log/${table_name}" }
}
""".replace("@JVM@", C1_ONLY_OPTS)
# sink uids as `streaming-engine explain` shows them (checked against the planner below)
STATE, LOG = "delta.orders_users", "delta.orders_users-2"
TABLES = {"shop.orders": "orders", "shop.users": "users"}
COLUMNS = {"orders": ("id", "op", "seq", "amount", "note"), "users": ("id", "op", "seq", "name")}
FILES_PER_EPOCH = 2  # max_files_per_trigger
FIRST_EPOCHS = 8  # input written up front; later waves add WAVE_EPOCHS when a run finishes early
WAVE_EPOCHS = 2
CI_KILLS = 19  # 17 targeted + 2 random (soak runs add random ones); STREAMING_ENGINE_SOAK=<kills> for more
SOAK_KILLS = int(os.environ.get("STREAMING_ENGINE_SOAK", "0") or 0)


# -- the input: the test's own CDC stream ----------------------------------------------
class Input:
    """Writes the json files and keeps every row it wrote, per table and file."""

    SHAPE = {"orders": (16, 9), "users": (8, 5)}  # keys, changes per file (an update is two rows)

    def __init__(self, root: Path, seed: int = 2026):
        self.root = root
        self.rng = random.Random(seed)
        self.files: dict[str, list[list[dict]]] = {t: [] for t in self.SHAPE}
        self._state: dict[str, dict[int, dict]] = {t: {} for t in self.SHAPE}
        self._seq = {t: 0 for t in self.SHAPE}

    @property
    def epochs(self) -> int:
        return len(self.files["orders"]) // FILES_PER_EPOCH

    def add_epochs(self, n: int) -> None:
        for _ in range(n * FILES_PER_EPOCH):
            for t in self.SHAPE:
                self._write(t, self._changes(t))

    def _values(self, t: str) -> dict:
        if t == "orders":
            return {"amount": round(self.rng.uniform(1, 500), 2), "note": self.rng.choice(["a", "bb", None, "ccc"])}
        return {"name": self.rng.choice(["ann", "bob", "cy", None, "dee"])}

    def _changes(self, t: str) -> list[dict]:
        keys, changes = self.SHAPE[t]
        state, out = self._state[t], []

        def emit(key: int, op: str, values: dict) -> None:
            self._seq[t] += 1
            out.append({"id": key, "op": op, "seq": self._seq[t], **values})

        for _ in range(changes):
            key = self.rng.randrange(keys)
            if key not in state:
                state[key] = self._values(t)
                emit(key, "+I", state[key])
            elif self.rng.random() < 0.3:
                emit(key, "-D", state.pop(key))
            else:
                emit(key, "-U", state[key])
                state[key] = self._values(t)
                emit(key, "+U", state[key])
        return out

    def _write(self, t: str, rows: list[dict]) -> None:
        index = len(self.files[t])
        folder = self.root / "in" / t
        folder.mkdir(parents=True, exist_ok=True)
        tmp, final = folder / f".{index:04d}.json.tmp", folder / f"{index:04d}.json"
        tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        stamp = 1_700_000_000 + 10 * index  # the file source orders files by modification time
        os.utime(tmp, (stamp, stamp))
        os.replace(tmp, final)  # files appear atomically
        self.files[t].append(rows)

    # what the targets must hold
    def epoch_rows(self, t: str, epoch: int) -> list[dict]:
        return [r for f in self.files[t][epoch * FILES_PER_EPOCH : (epoch + 1) * FILES_PER_EPOCH] for r in f]

    def states(self, t: str) -> list[dict[int, dict]]:
        """The upsert table after each epoch: changes applied in sequence order."""
        state: dict[int, dict] = {}
        out = []
        for e in range(self.epochs):
            for r in sorted(self.epoch_rows(t, e), key=lambda r: r["seq"]):
                if r["op"] == "-D":
                    state.pop(r["id"], None)
                elif r["op"] != "-U":
                    state[r["id"]] = dict(r)
            out.append(dict(state))
        return out


# -- what is on disk: Delta logs read as files (no Spark) -----------------------------------
def _commits(table: Path) -> list[tuple[int, list[dict]]]:
    """(version, actions) of every commit in a Delta table's log, oldest first."""
    out = []
    for p in sorted(glob.glob(str(table / "_delta_log" / "*.json"))):
        name = os.path.basename(p)[: -len(".json")]
        if name.isdigit():
            with open(p) as f:
                out.append((int(name), [json.loads(line) for line in f if line.strip()]))
    return out


def _txns(table: Path) -> list[tuple[int, str, int]]:
    """(Delta version, txn app id, txn version) of every txn action of a table."""
    return [(v, a["txn"]["appId"], a["txn"]["version"]) for v, actions in _commits(table) for a in actions if "txn" in a]


def _held(table: Path) -> int:
    """The newest epoch a target holds (-1: none, or no table)."""
    return max((epoch for _, _, epoch in _txns(table)), default=-1)


def _orphans(table: Path) -> set[str]:
    """Data files in the table directory that no commit added."""
    added = {a["add"]["path"] for _, actions in _commits(table) for a in actions if "add" in a}
    on_disk = {os.path.relpath(p, table) for p in glob.glob(str(table / "**" / "*.parquet"), recursive=True)}
    return {p for p in on_disk if not p.startswith("_delta_log")} - added


def _committed_rows(table: Path, version: int, columns: tuple[str, ...]) -> list[tuple]:
    """Rows of the files one commit added (read with pyarrow)."""
    [actions] = [a for v, a in _commits(table) if v == version]
    rows = []
    for a in actions:
        if "add" in a:
            rows.extend(pq.read_table(table / a["add"]["path"], columns=list(columns)).to_pylist())
    return [tuple(r[c] for c in columns) for r in rows]


def _ledger_epochs(work: Path, job: str = JOB_NAME) -> Counter:
    """(sink, table, epoch) -> committed ledger rows, read from the ledger's files."""
    ledger = work / "ck" / job / "_ledger"
    out: Counter = Counter()
    for _, actions in _commits(ledger):
        for a in actions:
            if "add" in a:
                for r in pq.read_table(ledger / a["add"]["path"], columns=["sink", "table", "epoch"]).to_pylist():
                    out[(r["sink"], r["table"], r["epoch"])] += 1
    return out


def _spark_progress(work: Path) -> tuple[int, int]:
    """(newest committed, newest started) batch of the query's checkpoint."""
    [ck] = glob.glob(str(work / "ck" / JOB_NAME / "orders_in+users_in"))

    def newest(name: str) -> int:
        return max((int(n) for n in os.listdir(os.path.join(ck, name)) if n.isdigit()), default=-1) if os.path.isdir(
            os.path.join(ck, name)
        ) else -1

    return newest("commits"), newest("offsets")


# -- running the job in a child process -------------------------------------------------
class Run:
    """``streaming-engine run`` in its own process group; its output read line by line."""

    def __init__(self, work: Path, fault: str | None = None):
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        env.pop("STREAMING_ENGINE_FAULT", None)
        if fault:
            env["STREAMING_ENGINE_FAULT"] = fault
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streaming_engine", "run", "-c", str(work / "job.conf"), "-i", f"work={work}",
             "--log-level", "INFO", "--log-format", "json"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, text=True,
        )  # fmt: skip
        self.lines: list[str] = []
        self.events: "queue.Queue[dict]" = queue.Queue()
        self.epoch_seconds: list[float] = []
        self.first: dict[str, float] = {}  # event -> seconds after the start when the run first logged it
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("{"):
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                self.first.setdefault(record.get("msg"), time.monotonic() - self.started)
                if record.get("msg") == "EpochCommitted":
                    self.epoch_seconds.append(record["event"]["seconds"])
                self.events.put(record)

    def wait_for(self, msg: str, timeout: float) -> bool:
        """True once the run logged ``msg``; False when it ended (or timed out) first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.events.get(timeout=0.2).get("msg") == msg:
                    return True
            except queue.Empty:
                if self.proc.poll() is not None and not self._reader.is_alive():
                    return False
        return False

    def kill(self) -> bool:
        """SIGKILL the driver (Python, its JVM, its Python workers); False if it had ended already."""
        if self.proc.poll() is not None:
            return False
        os.killpg(self.proc.pid, signal.SIGKILL)
        return True

    def wait(self, timeout: float = 900) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        finally:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # no orphan JVM or Python worker survives the driver
            except ProcessLookupError:
                pass
        self._reader.join(timeout=10)
        return rc

    def output(self) -> str:
        return "".join(self.lines)[-4000:]


# -- the targeted kills -----------------------------------------------------------------------
# (fault point, sink uid or None, epoch offset: 0 = the first epoch this run
# runs (Spark's replay after the previous kill, or the next new one), 1 = the
# one after), then what the targets hold afterwards: (sink, table) -> epoch,
# the ledger's epochs, whether an uncommitted file must be on disk ("log":
# a change-log table's, "ledger": the ledger's). Each line assumes the kills
# before it; the epoch is given for reading.
BOTH = ("orders", "users")
TARGETED = [
    # epoch 0: nothing exists yet
    ("epoch_start", None, 0, {STATE: (-1, -1), LOG: (-1, -1)}, [], None),
    ("sink_table_committed", STATE, 0, {STATE: "one of 0", LOG: (-1, -1)}, [], None),  # one upsert table of two (MERGEs run concurrently)
    ("after_sink", STATE, 0, {STATE: (0, 0), LOG: (-1, -1)}, [], None),  # between the two sinks
    ("sink_files_written", LOG, 0, {STATE: (0, 0), LOG: (-1, -1)}, [], "log"),  # append files, no commit
    ("sink_table_committed", LOG, 0, {STATE: (0, 0), LOG: "one of 0"}, [], None),
    ("ledger_files_written", None, 0, {STATE: (0, 0), LOG: (0, 0)}, [], "ledger"),
    ("after_ledger", None, 0, {STATE: (0, 0), LOG: (0, 0)}, [0], None),  # Spark's commit log not written
    # epoch 0 replayed (all held, ledger rows there), then epoch 1
    ("before_sink", STATE, 1, {STATE: (0, 0), LOG: (0, 0)}, [0], None),
    ("before_sink", LOG, 0, {STATE: (1, 1), LOG: (0, 0)}, [0], None),
    ("after_sink", LOG, 0, {STATE: (1, 1), LOG: (1, 1)}, [0], None),
    ("before_ledger", None, 0, {STATE: (1, 1), LOG: (1, 1)}, [0], None),
    ("after_ledger", None, 1, {STATE: (2, 2), LOG: (2, 2)}, [0, 1, 2], None),
    ("epoch_start", None, 0, {STATE: (2, 2), LOG: (2, 2)}, [0, 1, 2], None),  # the replay of a finished epoch
    ("sink_files_written", LOG, 1, {STATE: (3, 3), LOG: (2, 2)}, [0, 1, 2], "log"),
    ("sink_table_committed", LOG, 0, {STATE: (3, 3), LOG: "one of 3"}, [0, 1, 2], None),
    ("sink_table_committed", STATE, 1, {STATE: "one of 4", LOG: (3, 3)}, [0, 1, 2, 3], None),
    ("ledger_files_written", None, 0, {STATE: (4, 4), LOG: (4, 4)}, [0, 1, 2, 3], "ledger"),
]


def _check_after_kill(work: Path, what: str, fault_epoch: int, holds: dict, ledger_epochs: list[int], orphan: str | None,
                      orphans_before: dict[str, set[str]]) -> None:  # fmt: skip
    for sink, expected in holds.items():
        root = "state" if sink == STATE else "log"
        got = tuple(_held(work / root / t) for t in BOTH)
        if isinstance(expected, str):  # "one of <e>": the sink's concurrent commits (appends and MERGEs), at least one committed
            e = int(expected.split()[-1])
            assert e in got and set(got) <= {e, e - 1}, f"after {what}: {sink} holds {got}, expected one table at {e}"
        else:
            assert got == expected, f"after {what}: {sink} holds epochs {got} (orders, users), expected {expected}"
    found = _ledger_epochs(work)
    assert max(found.values(), default=1) == 1, f"after {what}: the ledger has an epoch twice: {found}"
    assert sorted({e for (_, _, e) in found}) == ledger_epochs, f"after {what}: ledger epochs {sorted({e for (_, _, e) in found})}"
    if orphan == "log":
        new = {t: _orphans(work / "log" / t) - orphans_before.get(f"log/{t}", set()) for t in BOTH}
        assert any(new.values()), f"after {what}: no uncommitted change-log file on disk"
    if orphan == "ledger":
        new = _orphans(work / "ck" / JOB_NAME / "_ledger") - orphans_before.get("ledger", set())
        assert new, f"after {what}: no uncommitted ledger file on disk"
    progress = _spark_progress(work)  # the epoch was planned (offset log), never committed (commit log)
    assert progress == (fault_epoch - 1, fault_epoch), f"after {what}: Spark's checkpoint (committed, started) = {progress}"


def _orphan_snapshot(work: Path) -> dict[str, set[str]]:
    out = {f"log/{t}": _orphans(work / "log" / t) for t in BOTH}
    out["ledger"] = _orphans(work / "ck" / JOB_NAME / "_ledger")
    return out


@pytest.mark.timeout(max(5400, 90 * SOAK_KILLS))  # a kill costs a JVM start and up to an epoch
def test_sigkill_at_any_point_gives_exactly_once_results(request, tmp_path):
    from streaming_engine.job import compile_text

    job = compile_text(JOB, variables={"work": str(tmp_path)})
    uids = sorted(v.uid for v in job.dag.vertices if v.kind == "sink")
    assert uids == [STATE, LOG], f"sink uids changed: {uids} (see streaming-engine explain)"
    (tmp_path / "job.conf").write_text(JOB)
    data = Input(tmp_path)
    data.add_epochs(FIRST_EPOCHS)
    want_kills = max(CI_KILLS, SOAK_KILLS)
    rng = random.Random(int(os.environ.get("STREAMING_ENGINE_SOAK_SEED", "7")))
    began = time.monotonic()
    kills, runs, finished_early, epoch_seconds = 0, 0, 0, []

    # 1. every fault point, at a place the previous kills prepared
    for point, sink, offset, holds, ledger_epochs, orphan in TARGETED:
        committed, _ = _spark_progress(tmp_path) if (tmp_path / "ck").exists() else (-1, -1)
        epoch = committed + 1 + offset
        fault = f"{point}@{epoch}" + (f":{sink}" if sink else "")
        before = _orphan_snapshot(tmp_path)
        run = Run(tmp_path, fault)
        rc = run.wait()
        runs += 1
        epoch_seconds += run.epoch_seconds
        assert rc == -signal.SIGKILL, f"fault {fault} did not kill the driver (rc {rc}):\n{run.output()}"
        kills += 1
        _check_after_kill(tmp_path, fault, epoch, holds, ledger_epochs, orphan, before)
        print(f"kill {kills}: {fault} after {time.monotonic() - run.started:.1f} s", flush=True)
    targeted_s = time.monotonic() - began

    # 2. random kills once the query runs, within about one epoch, until enough landed
    while kills < want_kills:
        window = 1.5 * statistics.median(epoch_seconds[-10:] or [5.0])
        run = Run(tmp_path)
        runs += 1
        if run.wait_for("PipelineStarted", timeout=600):
            time.sleep(rng.uniform(0.0, window))
        landed = run.kill()
        rc = run.wait()
        epoch_seconds += run.epoch_seconds
        if landed:
            assert rc == -signal.SIGKILL, f"run ended with {rc} before the kill:\n{run.output()}"
            kills += 1
            print(f"kill {kills}: random, {time.monotonic() - run.started:.1f} s after the start, "
                  f"{len(run.epoch_seconds)} epoch(s) committed in the run", flush=True)
        else:  # it finished first: more input, more epochs to kill
            assert rc == 0, f"job failed with {rc}:\n{run.output()}"
            finished_early += 1
            data.add_epochs(WAVE_EPOCHS)

    # 3. the last run completes the job
    run = Run(tmp_path)
    rc = run.wait()
    runs += 1
    assert rc == 0, f"job failed with {rc}:\n{run.output()}"
    assert "FINISHED" in run.output()
    request.node.user_properties.append((
        "ran",
        f"{kills} kills ({len(TARGETED)} targeted), {runs} runs, {data.epochs} epochs, "
        f"{finished_early} runs finished before their kill; targeted {targeted_s:.0f} s, "
        f"all runs {time.monotonic() - began:.0f} s",
    ))
    assert _spark_progress(tmp_path) == (data.epochs - 1, data.epochs - 1)
    _check_results(request.getfixturevalue("spark"), tmp_path, data)


def _check_results(spark, work: Path, data: Input) -> None:
    epochs = list(range(data.epochs))
    # the ledger table itself: every (sink, table) reached every epoch exactly once
    ledger = spark.read.format("delta").load(str(work / "ck" / JOB_NAME / "_ledger")).collect()
    per_key = Counter((r["sink"], r["table"], r["epoch"]) for r in ledger)
    dupes = {k: n for k, n in per_key.items() if n > 1}
    assert not dupes, f"ledger rows recorded twice: {dupes}"
    for sink in (STATE, LOG):
        for tid in TABLES:
            got = sorted(e for (s, t, e) in per_key if (s, t) == (sink, tid))
            assert got == epochs, f"ledger: {sink} {tid} has epochs {got}, expected {epochs}"
    assert {(r["sink"], r["table"]) for r in ledger} == {(s, t) for s in (STATE, LOG) for t in TABLES}

    for tid, t in TABLES.items():
        cols = COLUMNS[t]
        # every target's log: each epoch's txn in exactly one commit, one app id, epochs in version order
        version_of: dict[str, dict[int, int]] = {}
        for sink, root in ((STATE, "state"), (LOG, "log")):
            txns = _txns(work / root / t)
            apps = {app for _, app, _ in txns}
            assert len(apps) == 1 and sink in next(iter(apps)) and next(iter(apps)).endswith(tid), apps
            assert [e for _, _, e in txns] == epochs, f"{root}/{t}: txn epochs by version {[e for _, _, e in txns]}"
            version_of[root] = {e: v for v, _, e in txns}
            for r in ledger:
                if (r["sink"], r["table"]) == (sink, tid) and r["delta_version"] is not None:
                    assert r["delta_version"] == version_of[root][r["epoch"]], (
                        f"ledger {sink} {tid} epoch {r['epoch']}: delta_version {r['delta_version']}, "
                        f"the log has the epoch at {version_of[root][r['epoch']]}"
                    )
        # the change log: the input multiset, and each epoch's commit adds that epoch's rows
        everything = [tuple(r[c] for c in cols) for e in epochs for r in data.epoch_rows(t, e)]
        got_log = Counter(tuple(r[c] for c in cols) for r in spark.read.format("delta").load(str(work / "log" / t)).collect())
        assert got_log == Counter(everything), f"log/{t}: the change log has duplicates or losses"
        for e in epochs:
            want = Counter(tuple(r[c] for c in cols) for r in data.epoch_rows(t, e))
            assert Counter(_committed_rows(work / "log" / t, version_of["log"][e], cols)) == want, (
                f"log/{t}: the commit of epoch {e} does not hold that epoch's rows"
            )
        for r in ledger:
            if (r["sink"], r["table"]) == (LOG, tid) and not r["replayed"]:
                assert r["rows"] == len(data.epoch_rows(t, r["epoch"])), f"ledger {LOG} {tid} epoch {r['epoch']}: rows"
        # the upsert table after every epoch (time travel to the version holding it), and now
        states = data.states(t)
        for e in epochs:
            got = spark.read.format("delta").option("versionAsOf", version_of["state"][e]).load(str(work / "state" / t))
            assert {r["id"]: r.asDict() for r in got.collect()} == states[e], (
                f"state/{t} at epoch {e} (version {version_of['state'][e]}) differs from the input's state"
            )
        now = {r["id"]: r.asDict() for r in spark.read.format("delta").load(str(work / "state" / t)).collect()}
        assert now == states[-1], f"state/{t}: the final table differs from the input's state"
