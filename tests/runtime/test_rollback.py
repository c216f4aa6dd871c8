"""A submission that fails half way rolls back what it set up: a first start
whose sink cannot be opened leaves no checkpoint behind (the source's first
offsets it planned would pin the corrected job's start), says why, and the
corrected job then runs as new."""

from __future__ import annotations

from pathlib import Path

JOB = """
env {{ job.name = rollback, job.mode = BATCH, checkpoint.dir = "${{work}}/ck" }}
source {{ FakeSource {{ plugin_output = src, row.num = 7, schema = {{ fields {{ id = bigint }} }} }} }}
sink {{ Delta {{ plugin_input = src, path = "{target}" }} }}
"""


def test_a_failed_first_start_removes_the_checkpoint_it_began(run_job_text, spark, tmp_path, caplog):
    blocked = tmp_path / "not_a_table"
    (blocked / "_delta_log").mkdir(parents=True)
    (blocked / "_delta_log" / f"{0:020d}.json").write_text("not a Delta commit\n")  # the target cannot be read
    failed = run_job_text(JOB.format(target=blocked))
    assert failed.result.status == "FAILED", failed.result
    checkpoint = Path(tmp_path / "ck" / "rollback")
    assert not any(p.name == "offsets" for p in checkpoint.rglob("*")), sorted(map(str, checkpoint.rglob("*")))
    assert any("rolled back" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]

    fixed = run_job_text(JOB.format(target=tmp_path / "table"))
    assert fixed.result.status == "FINISHED", fixed.result.error
    assert spark.read.format("delta").load(str(tmp_path / "table")).count() == 7


def test_a_failed_start_of_a_running_job_keeps_its_checkpoint(run_job_text, spark, tmp_path):
    ran = run_job_text(JOB.format(target=tmp_path / "table"))
    assert ran.result.status == "FINISHED", ran.result.error
    offsets = sorted(p.name for p in (tmp_path / "ck" / "rollback").rglob("offsets/*"))
    assert offsets
    for commit in (tmp_path / "table" / "_delta_log").glob("*.json"):
        commit.write_text("not a Delta commit\n")  # the target cannot be read now
    for other in (tmp_path / "table" / "_delta_log").glob("*.crc"):
        other.unlink()
    failed = run_job_text(JOB.format(target=tmp_path / "table"))
    assert failed.result.status == "FAILED"
    assert sorted(p.name for p in (tmp_path / "ck" / "rollback").rglob("offsets/*"))[: len(offsets)] == offsets
