"""Rate source in a short STREAMING run, into a Delta table and the Noop sink."""

JOB = """
env {
  job.name = rate_job, job.mode = STREAMING, checkpoint.interval = 1000
  # repeated here: a nested checkpoint.* key in a job's env replaces the whole
  # checkpoint block of the engine defaults (shallow merge in config.models.parse_env)
  checkpoint.dir = "${work}/checkpoints"
}
source { Rate { plugin_output = ticks, rowsPerSecond = 50, numPartitions = 1 } }
sink {
  Delta { plugin_input = ticks, path = "${work}/ticks" }
  Noop { plugin_input = ticks }
}
"""


def test_rate_streams_distinct_values_and_noop_counts_them(spark, run_job_text):
    ran = run_job_text(JOB, stop_after_epochs=2, timeout_s=180)
    assert ran.result.status == "FINISHED", ran.result.error
    assert (ran.work / "checkpoints/rate_job").is_dir()
    values = [r["value"] for r in ran.rows(spark, "ticks", order_by="value")]
    assert values, "the rate source produced no rows in two epochs"
    assert values == list(range(len(values)))  # no gap, no duplicate
    committed = {r["sink"].split(".")[0]: r["total_rows"] for r in ran.result.committed}
    assert committed == {"delta": len(values), "noop": len(values)}
