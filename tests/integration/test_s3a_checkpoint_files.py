"""Spark's checkpoint and Delta's .crc files on s3a (a real S3-compatible
server, s3proxy) are written under their final names, never by rename (on S3
a copy and a delete): the engine's checkpoint file manager
(jvm/StoreCheckpointFileManager.java). The S3 requests are read from Hadoop's
S3A audit log, which names every request the client sends."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.spark, pytest.mark.components]

SCRIPT = r'''
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.components.s3proxy import S3Proxy
from streaming_engine.runtime.session import build_spark_session
from streaming_engine.job import compile_text
from streaming_engine.runtime.runner import execute

with S3Proxy(Path(sys.argv[2]) / "s3") as s3:
    s3.bucket("lake")
    spark = build_spark_session("s3a-checkpoint", conf=s3.hadoop_conf(), extras=["s3a"])
    jvm = spark._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.hadoop.fs.s3a.audit", jvm.org.apache.logging.log4j.Level.DEBUG)

    def mark(text):
        print(f"=== {text}", file=sys.stderr, flush=True)

    mark("job")
    result = execute(compile_text("""
env { job.name = ck, job.mode = BATCH, checkpoint.dir = "s3a://lake/ck", job.retry.times = 0 }
source { FakeSource { plugin_output = src, row.num = 30, rows.per.batch = 10, schema = { fields { id = bigint } } } }
sink { Delta { path = "s3a://lake/t" } }
"""), spark=spark)
    mark("end")
    rows = spark.read.format("delta").load("s3a://lake/t").count()

    hadoop = spark._jsparkSession.sessionState().newHadoopConf()
    managers = jvm.org.apache.spark.sql.execution.streaming.checkpointing
    engine = managers.CheckpointFileManager.create(jvm.org.apache.hadoop.fs.Path("s3a://lake/probe"), hadoop)
    path = lambda name: jvm.org.apache.hadoop.fs.Path(f"s3a://lake/probe/{name}")
    out = engine.createAtomic(path("cancelled"), False)
    out.write(bytearray(b"never"))
    out.cancel()
    out = engine.createAtomic(path("kept"), False)
    out.write(bytearray(b"once"))
    out.close()
    try:
        engine.createAtomic(path("kept"), False).close()
        refused = False
    except Exception as e:  # the Java exception itself, as Spark's callers catch it
        refused = e.java_exception.getClass().getName() == "org.apache.hadoop.fs.FileAlreadyExistsException"
    mark("spark's own manager")
    spark_own = managers.FileContextBasedCheckpointFileManager(jvm.org.apache.hadoop.fs.Path("s3a://lake/probe"), hadoop)
    out = spark_own.createAtomic(path("renamed"), False)
    out.write(bytearray(b"copy"))
    out.close()
    mark("done")
    print("RESULT " + json.dumps({
        "status": result.status, "rows": rows, "manager": engine.getClass().getName(),
        "cancelled_exists": engine.exists(path("cancelled")), "kept": engine.exists(path("kept")),
        "refused_overwrite": refused,
        "files": sorted(str(p.relative_to(s3.data / "lake")) for p in (s3.data / "lake").rglob("*") if p.is_file()),
    }))
'''


def _requests(log: str, start: str, end: str) -> list[str]:
    """The audit log's requests between two marks (one line each)."""
    part = log.split(f"=== {start}", 1)[1].split(f"=== {end}", 1)[0]
    return [line for line in part.splitlines() if "LoggingAuditor" in line and "Executing" in line]


def test_checkpoint_and_crc_files_on_s3a_are_written_in_place_never_renamed(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT), str(tmp_path)], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT "))[7:])
    assert result["status"] == "FINISHED" and result["rows"] == 30
    assert result["manager"] == "io.streamingengine.spark.StoreCheckpointFileManager"

    job = _requests(done.stderr, "job", "end")
    # the audit log sees the job's writes: the checkpoint's offsets and commits,
    # the table's and the ledger's commits and their .crc files, each one PUT
    # under its final name
    puts = [line for line in job if "object_put_request" in line]
    for written in ("ck/ck/", "/offsets/2", "/commits/2", "t/_delta_log/00000000000000000002.json",
                    "t/_delta_log/00000000000000000002.crc", "_ledger/_delta_log/00000000000000000002.crc"):
        assert any(written in line for line in puts), (written, puts[-20:])
    assert not [line for line in job if "CopyObjectRequest" in line or "op_rename" in line]
    assert not [f for f in result["files"] if f.endswith(".tmp")]
    # every request of the job from ONE S3A client (the audit names its file
    # system): the manager's other operations use the process's cached
    # FileSystem, never a FileContext, for which Hadoop builds a new
    # S3AFileSystem (SDK clients, thread pools); Delta makes a manager per
    # transaction (its .crc writer), so that was a new S3A client per commit
    clients = {re.search(r"&fs=([0-9a-f-]+)", line).group(1) for line in job}
    assert len(clients) == 1, clients

    # a cancelled file never appears; an existing one is not overwritten
    assert result["cancelled_exists"] is False and result["kept"] is True and result["refused_overwrite"] is True
    # the same audit log does see a rename: Spark's own manager copies its temporary file
    assert any("CopyObjectRequest" in line for line in _requests(done.stderr, "spark's own manager", "done"))
