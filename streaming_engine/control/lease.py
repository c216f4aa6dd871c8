"""One running instance per job: a lease on the job's checkpoint.

The lease is a directory next to the pipelines' checkpoints
(``<checkpoint.dir>/<job>/_lease/``) of numbered files, one per holder
(``0000000007.json``: host, pid, job id, since, renewed), read and written
through Hadoop's FileSystem (any scheme the checkpoint is on). A run takes
the lease by creating the next number with ``overwrite = false``: of two runs
starting at once one wins (atomic on local disks and HDFS; on S3 the create is
a check then a write, so two runs started within a request's time of each
other could both win: there the fence of issue #27 is what guarantees).

The holder renews its file every third of ``job.lease.seconds``. A lease
lapses when it was released, when it was not renewed for ``job.lease.seconds``
(its driver died or hangs on another host), or at once when its holder ran
on this host and its process is gone (a SIGKILLed driver does not block the
restart). A holder that finds a newer number than its own has lost the lease
(it was unreachable longer than the lease) and is told so (``on_lost``).
A lease is not a fence: a paused driver can still commit until it looks.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable

from streaming_engine.errors import EngineError

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

log = logging.getLogger("streaming_engine.control")


@dataclass(frozen=True)
class Holder:
    generation: int
    host: str
    pid: int
    job_id: str
    since: float
    renewed: float
    ttl: float
    pid_started: str = ""  # the process's start time on its host (a reused pid is another process)
    released: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, generation: int, text: str) -> "Holder":
        d = json.loads(text)
        d["generation"] = generation
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def live(self, now: float) -> bool:
        if self.released or self.renewed + self.ttl < now:
            return False
        if self.host == socket.gethostname():
            return _process_start(self.pid) == self.pid_started and self.pid_started != ""
        return True


def _process_start(pid: int) -> str:
    """The start time of process ``pid`` (clock ticks since boot), "" when none runs."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except OSError:
            return ""
        return "alive"  # no /proc: alive, start time unknown


def _fmt(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Lease:
    def __init__(self, spark: "SparkSession", directory: str, job: str, job_id: str, ttl: float):
        self.jvm = spark._jvm  # type: ignore[attr-defined]
        self.dir = self.jvm.org.apache.hadoop.fs.Path(directory)
        self.fs = self.dir.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
        self.directory, self.job, self.job_id, self.ttl = directory, job, job_id, ttl
        self.mine: Holder | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- files -----------------------------------------------------------------
    def _path(self, generation: int) -> Any:
        return self.jvm.org.apache.hadoop.fs.Path(self.dir, f"{generation:010d}.json")

    def _generations(self) -> list[int]:
        try:
            statuses = self.fs.listStatus(self.dir)
        except Exception as e:  # noqa: BLE001 - a missing directory is no lease yet
            if "FileNotFoundException" in str(e):
                return []
            raise
        out = []
        for st in statuses:
            name = st.getPath().getName()
            if name.endswith(".json") and name[:-5].isdigit():
                out.append(int(name[:-5]))
        return sorted(out)

    def _read(self, generation: int) -> Holder | None:
        for _ in range(3):  # a holder rewriting its file: read again
            try:
                stream = self.fs.open(self._path(generation))
                try:
                    text = self.jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
                finally:
                    stream.close()
                return Holder.from_json(generation, text)
            except Exception as e:  # noqa: BLE001
                if "FileNotFoundException" in str(e):
                    return None
                time.sleep(0.05)
        # unreadable: treat as held by an unknown run until it lapses by age
        return Holder(generation, "?", -1, "?", 0.0, time.time(), self.ttl)

    def _write(self, holder: Holder, overwrite: bool) -> None:
        data = bytearray(holder.to_json().encode())
        out = self.fs.create(self._path(holder.generation), overwrite)
        try:
            out.write(data)
        finally:
            out.close()

    # -- the lease ---------------------------------------------------------------
    def current(self) -> Holder | None:
        gens = self._generations()
        return self._read(gens[-1]) if gens else None

    def acquire(self) -> Holder | None:
        """Take the lease, or raise ``JOB.ALREADY_RUNNING`` naming its holder.
        Returns the previous holder when it died holding the lease (its run
        never recorded an end), else None."""
        gens = self._generations()
        newest = self._read(gens[-1]) if gens else None
        now = time.time()
        if newest is not None and newest.live(now):
            raise self._held(newest)
        generation = (gens[-1] if gens else 0) + 1
        mine = Holder(generation, socket.gethostname(), os.getpid(), self.job_id, now, now, self.ttl,
                      _process_start(os.getpid()))
        try:
            self._write(mine, overwrite=False)
        except Exception as e:  # noqa: BLE001 - another run created this number first
            if "FileAlreadyExists" not in str(e) and "already exists" not in str(e):
                raise
            other = self._read(generation)
            raise self._held(other or mine) from None
        self.mine = mine
        for g in gens:  # earlier holders' files: the newest is what counts
            try:
                self.fs.delete(self._path(g), False)
            except Exception:  # noqa: BLE001 - a leftover file is harmless
                pass
        return newest if newest is not None and not newest.released else None

    def _held(self, h: Holder) -> EngineError:
        return EngineError("JOB.ALREADY_RUNNING", {
            "job": self.job, "lease": self.directory, "holder": f"{h.host}:{h.pid}", "host": h.host, "pid": h.pid,
            "job_id": h.job_id, "since": _fmt(h.since), "renewed": _fmt(h.renewed), "expires": _fmt(h.renewed + h.ttl),
        })

    def keep(self, on_lost: Callable[[EngineError], None]) -> None:
        """Renew the lease every third of its time on a thread of its own;
        ``on_lost(error)`` when another run took it."""
        self._thread = threading.Thread(target=self._renew_loop, args=(on_lost,), name="lease-renewal", daemon=True)
        self._thread.start()

    def _renew_loop(self, on_lost: Callable[[EngineError], None]) -> None:
        while not self._stop.wait(self.ttl / 3):
            mine = self.mine
            if mine is None:
                return
            try:
                newest = max(self._generations(), default=0)
                if newest > mine.generation:
                    other = self._read(newest)
                    self.mine = None
                    on_lost(EngineError("JOB.LEASE_LOST", {
                        "job": self.job, "lease": self.directory, "ttl": self.ttl,
                        "holder": f"{other.host}:{other.pid}" if other else "?", "job_id": other.job_id if other else "?"}))
                    return
                self.mine = Holder(**{**asdict(mine), "renewed": time.time()})
                self._write(self.mine, overwrite=True)
            except Exception as e:  # noqa: BLE001 - a failed renewal is retried; the lease lapses only after ttl
                log.warning("lease renewal failed", extra={"lease": self.directory, "error": str(e)[:300]})

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        mine, self.mine = self.mine, None
        if mine is None:
            return
        try:
            if max(self._generations(), default=0) == mine.generation:
                self._write(Holder(**{**asdict(mine), "renewed": time.time(), "released": True}), overwrite=True)
        except Exception as e:  # noqa: BLE001 - it lapses by age then
            log.warning("lease release failed", extra={"lease": self.directory, "error": str(e)[:300]})
