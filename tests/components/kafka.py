"""A real Apache Kafka broker (4.4, KRaft, one node acting as broker and controller)."""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from pathlib import Path

from tests.components import (
    JVM_TEST_FLAGS,
    ComponentError,
    ensure_component,
    free_ports,
    java,
    log_tail,
    port_open,
    stop_process,
)

_LOG4J2 = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = warn
"""


def _kafka_uuid() -> str:
    """A Kafka cluster id (base64url of 16 random bytes, unpadded, not starting with '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class KafkaBroker:
    """One Kafka broker on free 127.0.0.1 ports, its data and ``kafka.log`` in ``workdir``.

    ``start()`` returns once a metadata request answers; ``stop()`` sends SIGTERM to
    the broker's pid (controlled shutdown), SIGKILL after ``stop_timeout``. Usable as
    a context manager. ``config`` adds or overrides ``server.properties`` entries.
    """

    def __init__(
        self,
        workdir: str | Path,
        *,
        config: dict[str, str] | None = None,
        heap: str = "512m",
        start_timeout: float = 60.0,
        stop_timeout: float = 30.0,
    ) -> None:
        self.workdir = Path(workdir)
        self.extra_config = dict(config or {})
        self.heap = heap
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.port: int | None = None
        self.controller_port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path = self.workdir / "kafka.log"

    # -- lifecycle -----------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise ComponentError("Kafka broker not started")
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def _server_properties(self) -> str:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
        }
        props.update(self.extra_config)
        return "".join(f"{k}={v}\n" for k, v in props.items())

    def start(self) -> "KafkaBroker":
        if self.proc is not None:
            raise ComponentError("Kafka broker already started")
        home = ensure_component("kafka")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port, self.controller_port = free_ports(2)
        props = self.workdir / "server.properties"
        props.write_text(self._server_properties(), encoding="utf-8")
        log4j = self.workdir / "log4j2.properties"
        log4j.write_text(_LOG4J2, encoding="utf-8")
        base = [
            java(),
            f"-Xmx{self.heap}",
            *JVM_TEST_FLAGS,
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            str(home / "libs" / "*"),
        ]
        with open(self.log_path, "ab") as log:
            fmt = subprocess.run(
                [*base, "kafka.tools.StorageTool", "format", "-t", _kafka_uuid(), "-c", str(props)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=120,
            )
            if fmt.returncode != 0:
                raise ComponentError(
                    f"kafka-storage format failed (exit {fmt.returncode}):\n{log_tail(self.log_path)}"
                )
            self.proc = subprocess.Popen(
                [*base, "kafka.Kafka", str(props)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self.start_timeout
        # the TCP port first: librdkafka would log every refused connection
        while not port_open(self.port):
            self._check_alive()
            if time.monotonic() > deadline:
                raise ComponentError(f"Kafka did not listen on {self.bootstrap}:\n{log_tail(self.log_path)}")
            time.sleep(0.1)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while True:
            self._check_alive()
            try:
                md = admin.list_topics(timeout=2)
                if md.brokers:
                    return
            except Exception:  # KafkaException: not answering yet
                pass
            if time.monotonic() > deadline:
                raise ComponentError(
                    f"Kafka at {self.bootstrap} did not answer a metadata request within "
                    f"{self.start_timeout:.0f} s:\n{log_tail(self.log_path)}"
                )
            time.sleep(0.2)

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise ComponentError(
                f"Kafka exited with code {self.proc.returncode} while starting:\n{log_tail(self.log_path)}"
            )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc, timeout=self.stop_timeout)

    def __enter__(self) -> "KafkaBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- helpers -------------------------------------------------------------
    def admin(self, **config):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, **config})

    def create_topic(
        self, name: str, partitions: int = 1, config: dict[str, str] | None = None, timeout: float = 30.0
    ) -> None:
        """Create ``name`` (replication factor 1) and wait until every partition has a leader."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))],
            operation_timeout=timeout,
            request_timeout=timeout,
        )
        futures[name].result(timeout)
        deadline = time.monotonic() + timeout
        while True:
            md = admin.list_topics(topic=name, timeout=5).topics.get(name)
            if (
                md is not None
                and md.error is None
                and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values())
            ):
                return
            if time.monotonic() > deadline:
                raise ComponentError(f"topic {name} has no leader for every partition after {timeout} s")
            time.sleep(0.1)

    def topics(self) -> set[str]:
        return {t for t in self.admin().list_topics(timeout=10).topics if not t.startswith("__")}
