"""One running instance per job: a lease on the job's checkpoint.

The lease is a directory next to the pipelines' checkpoints
(``<checkpoint.dir>/<job>/_lease/``) of small JSON files named
``<generation>-<renewal>.json`` (host, pid, job id, since, renewed), read and
written through Hadoop's FileSystem (any scheme the checkpoint is on). Files
are only ever created, never rewritten, so a reader never sees half of one
(the newest readable file counts). A run takes the lease by creating the next
generation's first file with ``overwrite = false``: of two runs starting at
once one wins (atomic on local disks and HDFS; on S3 the create is a check
then a write, so two runs started within a request's time of each other could
both win: there the fence of issue #27 is what guarantees).

The holder renews every third of ``job.lease.seconds`` (a new renewal file,
the previous one deleted). A lease lapses when it was released, when it was
not renewed for ``job.lease.seconds`` (its driver died or hangs on another
host), or at once when its holder ran on this host and its process is gone (a
SIGKILLed driver does not block the restart). A holder that finds a newer
generation than its own has lost the lease (it was unreachable longer than
the lease) and is told so (``on_lost``).

``streaming-engine stop`` (from any host) asks the holder to stop by creating
``stop-<generation>.json`` next to its files; the holder looks every second
(``on_stop``). A request names the generation it is for, so a request left
behind never stops a later run.
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
        self._renewal = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- files -----------------------------------------------------------------
    def _path(self, generation: int, renewal: int) -> Any:
        return self.jvm.org.apache.hadoop.fs.Path(self.dir, f"{generation:010d}-{renewal:010d}.json")

    def _files(self) -> list[tuple[int, int]]:
        """(generation, renewal) of every lease file, oldest first."""
        try:
            statuses = self.fs.listStatus(self.dir)
        except Exception as e:  # noqa: BLE001 - a missing directory is no lease yet
            if "FileNotFoundException" in str(e):
                return []
            raise
        out = []
        for st in statuses:
            gen, _, rest = st.getPath().getName().partition("-")
            renewal = rest[:-5] if rest.endswith(".json") else ""
            if gen.isdigit() and renewal.isdigit():
                out.append((int(gen), int(renewal)))
        return sorted(out)

    def _read(self, generation: int, renewal: int) -> Holder | None:
        """The holder a file names; None when it is gone or cannot be read
        (a run died while writing it)."""
        try:
            stream = self.fs.open(self._path(generation, renewal))
            try:
                text = self.jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
            finally:
                stream.close()
            return Holder.from_json(generation, text)
        except Exception:  # noqa: BLE001 - missing or unreadable: the next older file counts
            return None

    def _newest(self, files: list[tuple[int, int]]) -> Holder | None:
        for gen, renewal in reversed(files):
            holder = self._read(gen, renewal)
            if holder is not None:
                return holder
        return None

    def _write(self, holder: Holder, renewal: int) -> None:
        out = self.fs.create(self._path(holder.generation, renewal), False)
        try:
            out.write(bytearray(holder.to_json().encode()))
        finally:
            out.close()

    def _delete_before(self, files: list[tuple[int, int]], keep: tuple[int, int]) -> None:
        for f in files:
            if f < keep:
                try:
                    self.fs.delete(self._path(*f), False)
                except Exception:  # noqa: BLE001 - a leftover file is harmless: the newest counts
                    pass

    # -- the lease ---------------------------------------------------------------
    def _look(self) -> tuple[list[tuple[int, int]], Holder | None]:
        """The lease files and the holder the newest readable one names. A
        renewal writes the holder's next file and then deletes the older ones,
        so every file listed a moment ago may be gone when read: then a newer
        one exists, and the directory is listed again. Only a listing that
        did not change while none of its files could be read means no holder
        (a run died while writing its first file)."""
        files = self._files()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            newest = self._newest(files)
            if newest is not None:
                return files, newest
            again = self._files()
            if again == files:
                return files, None
            files = again
        raise RuntimeError(f"the lease directory {self.directory} changed faster than it could be read for 30 s")

    def current(self) -> Holder | None:
        return self._look()[1]

    def acquire(self) -> Holder | None:
        """Take the lease, or raise ``JOB.ALREADY_RUNNING`` naming its holder.
        Returns the previous holder when it died holding the lease (its run
        may not have recorded an end), else None."""
        files, newest = self._look()
        now = time.time()
        if newest is not None and newest.live(now):
            raise self._held(newest)
        generation = max((g for g, _ in files), default=0) + 1
        mine = Holder(generation, socket.gethostname(), os.getpid(), self.job_id, now, now, self.ttl,
                      _process_start(os.getpid()))
        try:
            self._write(mine, 0)
        except Exception as e:  # noqa: BLE001 - another run created this generation first
            if "FileAlreadyExists" not in str(e) and "already exists" not in str(e):
                raise
            other = self._read(generation, 0)
            raise self._held(other or mine) from None
        self.mine, self._renewal = mine, 0
        self._delete_before(files + [(generation, 0)], (generation, 0))
        for g in {g for g, _ in files}:  # stop requests for earlier holders
            try:
                self.fs.delete(self._stop_path(g), False)
            except Exception:  # noqa: BLE001 - one left behind is ignored: it names another generation
                pass
        return newest if newest is not None and not newest.released else None

    def _held(self, h: Holder) -> EngineError:
        return EngineError("JOB.ALREADY_RUNNING", {
            "job": self.job, "lease": self.directory, "holder": f"{h.host}:{h.pid}", "host": h.host, "pid": h.pid,
            "job_id": h.job_id, "since": _fmt(h.since), "renewed": _fmt(h.renewed), "expires": _fmt(h.renewed + h.ttl),
        })

    def keep(self, on_lost: Callable[[EngineError], None], on_stop: Callable[[bool], None] | None = None) -> None:
        """Renew the lease every third of its time on a thread of its own;
        ``on_lost(error)`` when another run took it, ``on_stop(savepoint)``
        when a stop was requested for this holder."""
        self._thread = threading.Thread(target=self._renew_loop, args=(on_lost, on_stop), name="lease-renewal",
                                        daemon=True)
        self._thread.start()

    def _stop_path(self, generation: int) -> Any:
        return self.jvm.org.apache.hadoop.fs.Path(self.dir, f"stop-{generation:010d}.json")

    def request_stop(self, savepoint: bool, by: str) -> Holder:
        """Ask the live holder to stop (``JOB.NOT_RUNNING`` when none holds the lease)."""
        holder = self.current()
        if holder is None or not holder.live(time.time()):
            last = f" (the last run was job id {holder.job_id})" if holder is not None else ""
            raise EngineError("JOB.NOT_RUNNING", {"job": self.job, "lease": self.directory, "last": last})
        out = self.fs.create(self._stop_path(holder.generation), True)
        try:
            out.write(bytearray(json.dumps({"savepoint": savepoint, "by": by, "at": time.time()}).encode()))
        finally:
            out.close()
        return holder

    def _stop_requested(self, generation: int) -> bool | None:
        """None: no request for this holder; else whether it asks for a savepoint."""
        path = self._stop_path(generation)
        try:
            stream = self.fs.open(path)
        except Exception:  # noqa: BLE001 - no request
            return None
        try:
            text = self.jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
        try:
            return bool(json.loads(text).get("savepoint"))
        except ValueError:
            return False  # a request being written: a stop at least

    def _renew(self, released: bool = False) -> list[tuple[int, int]]:
        """Write the next renewal file of this holder; the files seen before."""
        mine = self.mine
        assert mine is not None
        files = self._files()
        self.mine = Holder(**{**asdict(mine), "renewed": time.time(), "released": released})
        self._renewal += 1
        self._write(self.mine, self._renewal)
        self._delete_before(files, (mine.generation, self._renewal))
        return files

    def _renew_loop(self, on_lost: Callable[[EngineError], None], on_stop: Callable[[bool], None] | None) -> None:
        renewed = time.monotonic()
        while not self._stop.wait(min(1.0, self.ttl / 3)):
            mine = self.mine
            if mine is None:
                return
            try:
                if on_stop is not None and (asked := self._stop_requested(mine.generation)) is not None:
                    on_stop(asked)
                    on_stop = None  # asked once
                if time.monotonic() - renewed < self.ttl / 3:
                    continue
                renewed = time.monotonic()
                files = self._files()
                newest = max((g for g, _ in files), default=0)
                if newest > mine.generation:
                    other = self._newest([f for f in files if f[0] == newest])
                    self.mine = None
                    on_lost(EngineError("JOB.LEASE_LOST", {
                        "job": self.job, "lease": self.directory, "ttl": self.ttl,
                        "holder": f"{other.host}:{other.pid}" if other else "?", "job_id": other.job_id if other else "?"}))
                    return
                self._renew()
            except Exception as e:  # noqa: BLE001 - a failed renewal is retried; the lease lapses only after ttl
                log.warning("lease renewal failed", extra={"lease": self.directory, "error": str(e)[:300]})

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self.mine is None:
            return
        try:
            if max((g for g, _ in self._files()), default=0) == self.mine.generation:
                self._renew(released=True)
        except Exception as e:  # noqa: BLE001 - it lapses by age then
            log.warning("lease release failed", extra={"lease": self.directory, "error": str(e)[:300]})
        self.mine = None
