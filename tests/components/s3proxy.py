"""A real S3-compatible server: s3proxy (jclouds' filesystem provider) on a
free 127.0.0.1 port, its objects stored as plain files under ``data/<bucket>/``."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.components import (
    JVM_TEST_FLAGS,
    ComponentError,
    Server,
    ensure_component,
    free_ports,
    java,
    log_tail,
    port_open,
    stop_process,
    wait_until,
)


class S3Proxy(Server):
    """``with S3Proxy(dir) as s3: s3.bucket("b")``; ``s3.hadoop_conf()`` gives the
    ``spark.hadoop.fs.s3a.*`` settings that reach it (path-style, no TLS)."""

    access_key = "engine-test-key"
    secret_key = "engine-test-secret"

    def __init__(self, workdir: str | Path):
        self.workdir = Path(workdir)
        self.data = self.workdir / "data"
        (self.port,) = free_ports(1)
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bucket(self, name: str) -> str:
        (self.data / name).mkdir(parents=True, exist_ok=True)  # a bucket is a folder of the filesystem provider
        return name

    def hadoop_conf(self) -> dict[str, str]:
        return {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
            "spark.hadoop.fs.s3a.access.key": self.access_key,
            "spark.hadoop.fs.s3a.secret.key": self.secret_key,
            "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        }

    def start(self) -> "S3Proxy":
        home = ensure_component("s3proxy")
        self.data.mkdir(parents=True, exist_ok=True)
        props = self.workdir / "s3proxy.properties"
        props.write_text(
            f"s3proxy.endpoint={self.endpoint}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={self.access_key}\n"
            f"s3proxy.credential={self.secret_key}\n"
            "jclouds.provider=filesystem\n"
            f"jclouds.filesystem.basedir={self.data}\n"
        )
        log = (self.workdir / "s3proxy.log").open("wb")
        self.proc = subprocess.Popen(
            [java(), "-Xmx384m", *JVM_TEST_FLAGS, "-cp", str(home / "libs" / "*"), "org.gaul.s3proxy.Main",
             "--properties", str(props)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.workdir,
        )
        if not wait_until(lambda: port_open(self.port) or self.proc.poll() is not None, timeout=60):
            pass
        if self.proc.poll() is not None or not port_open(self.port):
            raise ComponentError(f"s3proxy did not start:\n{log_tail(self.workdir / 's3proxy.log')}")
        return self

    def stop(self) -> None:
        stop_process(self.proc, timeout=10)

