"""Real Debezium (the embedded engine, PostgreSQL connector) publishing into a real Kafka.

The JVM side is ``tests/components/java/DebeziumToKafka.java`` (compiled by
``scripts/fetch_components.py``). Every change event goes to Kafka topic
``<topic_prefix>.<schema>.<table>`` with Debezium's JSON key and value as strings;
deletes are followed by a tombstone (null value); TRUNCATE events are emitted
(``skipped.operations=none``) with a null key. Debezium's headers are copied as
JSON strings (``__debezium.oldkey`` on the create event of a primary-key update,
``__debezium.newkey`` on its delete, ``__debezium.context.*`` on every event).
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
import uuid
from pathlib import Path

from tests.components import (
    JVM_TEST_FLAGS,
    ComponentError,
    ensure_component,
    java,
    log_tail,
    stop_process,
)
from tests.components.kafka import KafkaBroker
from tests.components.postgres import PostgresServer

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _escape(value: str) -> str:
    """A value for a java.util.Properties file."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")


class DebeziumPostgresToKafka:
    """Debezium capturing ``tables`` (``schema.table`` names) of ``postgres`` into ``kafka``.

    ``start()`` returns once the initial snapshot completed, every snapshot event is
    acknowledged by Kafka and the replication stream is connected (the program's
    ``READY`` line). ``published`` is the number of records (events and tombstones)
    acknowledged by Kafka so far; ``wait_published(n)`` waits for it. ``stop()``
    sends SIGTERM (the engine closes and, with ``slot.drop.on.stop=true``, drops its
    replication slot), SIGKILL after ``stop_timeout``.

    The replication slot and publication names are unique per instance (derived
    from ``topic_prefix`` and a random suffix) unless given. ``properties`` adds or
    overrides engine properties (``producer.*`` keys configure the Kafka producer).
    The engine's log and stdout go to ``workdir/debezium.log``; its offsets to
    ``workdir/offsets.dat``.
    """

    def __init__(
        self,
        workdir: str | Path,
        postgres: PostgresServer,
        kafka: KafkaBroker,
        topic_prefix: str,
        tables: list[str],
        *,
        schemas_enable: bool = True,
        slot_name: str | None = None,
        publication_name: str | None = None,
        snapshot_mode: str = "initial",
        properties: dict[str, str] | None = None,
        heap: str = "384m",
        start_timeout: float = 90.0,
        stop_timeout: float = 30.0,
    ) -> None:
        if not _NAME.match(topic_prefix):
            raise ValueError(f"topic_prefix {topic_prefix!r}: use letters, digits and underscores")
        for t in tables:
            if t.count(".") != 1:
                raise ValueError(f"table {t!r}: expected schema.table")
        suffix = uuid.uuid4().hex[:8]
        self.workdir = Path(workdir)
        self.postgres = postgres
        self.kafka = kafka
        self.topic_prefix = topic_prefix
        self.tables = list(tables)
        self.schemas_enable = schemas_enable
        self.slot_name = slot_name or f"dbz_{topic_prefix.lower()}_{suffix}"
        self.publication_name = publication_name or f"dbz_pub_{topic_prefix.lower()}_{suffix}"
        self.snapshot_mode = snapshot_mode
        self.extra_properties = dict(properties or {})
        self.heap = heap
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.log_path = self.workdir / "debezium.log"
        self.properties_path = self.workdir / "debezium.properties"
        self.offsets_path = self.workdir / "offsets.dat"
        self.proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._cond = threading.Condition()
        self._published = 0
        self._ready = False
        self._failed: str | None = None
        self._stopped = False

    # -- naming --------------------------------------------------------------
    def topic(self, table: str) -> str:
        """Kafka topic of ``schema.table``: ``<topic_prefix>.<schema>.<table>``."""
        return f"{self.topic_prefix}.{table}"

    @property
    def topics(self) -> list[str]:
        return [self.topic(t) for t in self.tables]

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    # -- lifecycle -----------------------------------------------------------
    def engine_properties(self) -> dict[str, str]:
        pg = self.postgres
        props = {
            "name": f"engine-{self.topic_prefix}",
            "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
            "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
            "offset.storage.file.filename": str(self.offsets_path),
            "offset.flush.interval.ms": "1000",
            "database.hostname": pg.host,
            "database.port": str(pg.port),
            "database.user": pg.user,
            "database.password": "",
            "database.dbname": pg.dbname,
            "topic.prefix": self.topic_prefix,
            "table.include.list": ",".join(re.escape(t) for t in self.tables),
            "plugin.name": "pgoutput",
            "slot.name": self.slot_name,
            "slot.drop.on.stop": "true",
            "publication.name": self.publication_name,
            "publication.autocreate.mode": "filtered",
            "snapshot.mode": self.snapshot_mode,
            "skipped.operations": "none",  # the default "t" drops TRUNCATE events
            "tombstones.on.delete": "true",
            "converter.schemas.enable": "true" if self.schemas_enable else "false",
            "producer.bootstrap.servers": self.kafka.bootstrap,
            "producer.acks": "all",
            "producer.enable.idempotence": "true",
            "producer.client.id": f"debezium-{self.topic_prefix}",
            "producer.linger.ms": "5",
        }
        props.update(self.extra_properties)
        return props

    def start(self) -> "DebeziumPostgresToKafka":
        if self.proc is not None:
            raise ComponentError("Debezium already started")
        home = ensure_component("debezium")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.properties_path.write_text(
            "".join(f"{k}={_escape(v)}\n" for k, v in self.engine_properties().items()), encoding="utf-8"
        )
        cmd = [
            java(),
            f"-Xmx{self.heap}",
            *JVM_TEST_FLAGS,
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd HH:mm:ss.SSS",
            "-Dorg.slf4j.simpleLogger.log.org.apache.kafka=warn",
            "-cp",
            f"{home / 'libs' / '*'}:{home / 'classes'}",
            "DebeziumToKafka",
            str(self.properties_path),
        ]
        self._published, self._ready, self._failed, self._stopped = 0, False, None, False
        log = open(self.log_path, "ab", buffering=0)
        try:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, cwd=self.workdir
            )
        finally:
            log.close()
        self._reader = threading.Thread(target=self._read_stdout, args=(self.proc,), daemon=True)
        self._reader.start()
        try:
            self._wait(lambda: self._ready, self.start_timeout, "finish its snapshot (READY)")
        except BaseException:
            self.stop()
            raise
        return self

    def _read_stdout(self, proc: subprocess.Popen) -> None:
        with open(self.log_path, "ab", buffering=0) as log:
            for raw in proc.stdout:
                log.write(b"[stdout] " + raw)
                line = raw.decode("utf-8", "replace").strip()
                with self._cond:
                    if line.startswith("PUBLISHED "):
                        self._published = int(line.split()[1])
                    elif line == "READY":
                        self._ready = True
                    elif line.startswith("FAILED"):
                        self._failed = line
                    elif line == "STOPPED":
                        self._stopped = True
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _wait(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                if self._failed:
                    raise ComponentError(f"Debezium failed: {self._failed}\n{log_tail(self.log_path)}")
                if self.proc is None or self.proc.poll() is not None:
                    code = self.proc.returncode if self.proc else None
                    raise ComponentError(
                        f"Debezium exited (code {code}) before it could {what}:\n{log_tail(self.log_path)}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ComponentError(
                        f"Debezium did not {what} within {timeout:.0f} s:\n{log_tail(self.log_path)}"
                    )
                self._cond.wait(min(left, 0.2))

    @property
    def published(self) -> int:
        """Records (events and tombstones) Kafka acknowledged so far."""
        with self._cond:
            return self._published

    def wait_published(self, n: int, timeout: float = 30.0) -> int:
        """Wait until at least ``n`` records are in Kafka; the count then."""
        self._wait(lambda: self._published >= n, timeout, f"publish {n} records (has {self._published})")
        return self.published

    def stop(self) -> int | None:
        """SIGTERM (the engine closes cleanly), SIGKILL after ``stop_timeout``; the exit code."""
        proc, self.proc = self.proc, None
        code = stop_process(proc, timeout=self.stop_timeout)
        if self._reader is not None:
            self._reader.join(timeout=5)
            self._reader = None
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()
        return code

    @property
    def stopped_cleanly(self) -> bool:
        """The program printed STOPPED (its shutdown hook closed the engine and producer)."""
        with self._cond:
            return self._stopped

    def __enter__(self) -> "DebeziumPostgresToKafka":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
