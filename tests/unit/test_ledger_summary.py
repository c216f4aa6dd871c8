"""A run's summary is aggregated from its epoch events, like the ledger's SQL summary."""

from streaming_engine.checkpoint.ledger import summarize
from streaming_engine.runtime.context import CommitRecord


def test_summary_totals_rows_and_epochs_and_keeps_the_last_target_and_version():
    epochs = [
        ("p", 0, [CommitRecord("delta", "db.a", "/wh/a", 10, version=0), CommitRecord("delta", "db.b", "/wh/b", 5, version=0)]),
        ("p", 1, [CommitRecord("delta", "db.a", "/wh/a", 7, version=1)]),
        # a replayed epoch: skipped by Delta, no version, counted as an epoch with 0 rows
        ("p", 2, [CommitRecord("delta", "db.a", "/wh/a2", 0, version=None, skipped=True)]),
        ("q", 0, [CommitRecord("console", "db.a", "stdout", 3)]),
    ]
    rows = summarize(epochs)
    assert [(r["pipeline"], r["sink"], r["table"]) for r in rows] == [
        ("p", "delta", "db.a"), ("p", "delta", "db.b"), ("q", "console", "db.a")
    ]
    a = rows[0]
    assert (a["last_epoch"], a["target"], a["delta_version"], a["total_rows"], a["epochs"]) == (2, "/wh/a2", 1, 17, 3)
    assert rows[2]["delta_version"] is None and rows[2]["total_rows"] == 3
    assert summarize([]) == []


def test_run_summary_names_each_table_or_says_nothing_was_new(capsys):
    from streaming_engine.runtime.runner import JobResult, print_result
    from tests.unit.helpers import compile_ok

    job = compile_ok("env { job.name = shop }\nsource { TestSource { } }\nsink { TestSink { } }")
    rows = summarize([("p", 4, [CommitRecord("delta", "db.a", "/wh/a", 12, version=3)])])
    print_result(job, JobResult("FINISHED", committed=rows))
    out = capsys.readouterr().out
    assert "job 'shop' FINISHED" in out
    assert "db.a -> /wh/a: 12 rows committed by delta over 1 epoch(s) in this run (last epoch 4)" in out
    assert "nothing new" not in out
    print_result(job, JobResult("FINISHED"))
    assert "nothing new to commit in this run" in capsys.readouterr().out
