"""Console sink at run time: rows printed with table id and row kind."""

import re

JOB = """
env { job.name = console_job }
source {
  FakeSource {
    plugin_output = fake
    tables_configs = [
      { schema = { table = "shop.users", fields { id = bigint, name = string, tags = "array<string>" } },
        rows = [
          { kind = INSERT, fields = [1, "Ann", ["a", "b"]] },
          { kind = UPDATE_AFTER, fields = [2, null, []] }
        ] },
      { schema = { table = "shop.orders", fields { id = bigint, amount = double } },
        rows = [ { kind = DELETE, fields = [7, 2.5] } ] }
    ]
  }
}
sink {
  Console { plugin_input = fake }
  Console { plugin_input = fake, log.print.data = false }
}
"""


def test_console_prints_every_row_with_table_and_kind(run_job_text, capsys):
    ran = run_job_text(JOB)
    assert ran.result.status == "FINISHED", ran.result.error
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "SeaTunnelRow#" in ln]
    assert lines == [
        "subtaskIndex=0 rowIndex=1: SeaTunnelRow#tableId=shop.users SeaTunnelRow#kind=INSERT : 1, Ann, [\"a\", \"b\"]",
        "subtaskIndex=0 rowIndex=2: SeaTunnelRow#tableId=shop.users SeaTunnelRow#kind=UPDATE_AFTER : 2, null, []",
        "subtaskIndex=0 rowIndex=1: SeaTunnelRow#tableId=shop.orders SeaTunnelRow#kind=DELETE : 7, 2.5",
    ]  # printed once: the second Console only counts
    assert re.search(r"output rowType of shop.users: id<BIGINT>, name<STRING>, tags<ARRAY<STRING>>", out)
    counted = {(r["sink"], r["table"]): r["total_rows"] for r in ran.result.committed}
    assert sorted(counted.values()) == [1, 1, 2, 2]
