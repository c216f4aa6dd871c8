"""Delta source at run time: a snapshot stream and the change data feed as row kinds."""

from types import SimpleNamespace

import pytest

from sources.delta import Delta, DeltaSourceOptions
from streaming_engine.errors import SchemaError

JOB = """
env { job.name = delta_in }
source {
  Delta {
    plugin_output = snap, path = "${work}/src"
    schema = { table = "shop.items", fields { id = bigint, name = string, qty = bigint } }
  }
  Delta {
    plugin_output = feed, path = "${work}/src", read_change_feed = true, starting_version = 0
    schema = { table = "shop.items", fields { id = bigint, name = string, qty = bigint },
               primaryKey { name = pk, columnNames = [id] } }
  }
}
sink {
  Delta { plugin_input = snap, path = "${work}/copy" }
  Delta { plugin_input = feed, path = "${work}/mirror", save_mode = upsert }
  Console { plugin_input = feed }
}
"""


def test_delta_snapshot_and_change_feed(spark, run_job_text, tmp_path, capsys):
    src = str(tmp_path / "src")
    spark.createDataFrame([(1, "a", 1), (2, "b", 2), (3, "c", 3)], "id bigint, name string, qty int").write.format("delta").option(
        "delta.enableChangeDataFeed", "true"
    ).save(src)
    spark.sql(f"UPDATE delta.`{src}` SET name = 'B', qty = 20 WHERE id = 2")
    spark.sql(f"DELETE FROM delta.`{src}` WHERE id = 1")
    spark.createDataFrame([(4, "d", 4)], "id bigint, name string, qty int").write.format("delta").mode("append").save(src)
    expected = sorted((r.id, r.name, r.qty) for r in spark.read.format("delta").load(src).collect())
    assert expected == [(2, "B", 20), (3, "c", 3), (4, "d", 4)]

    ran = run_job_text(JOB)
    assert ran.result.status == "FINISHED", ran.result.error
    # the snapshot stream reads the table as it is now (int widened to the declared bigint)
    assert sorted((r["id"], r["name"], r["qty"]) for r in ran.rows(spark, "copy")) == expected
    # the change feed replays inserts, updates (-U/+U) and deletes; the upsert rebuilds the table
    assert sorted((r["id"], r["name"], r["qty"]) for r in ran.rows(spark, "mirror")) == expected
    # row kinds from _change_type, in commit order (Console prints by __seq)
    printed = [ln.split("SeaTunnelRow#kind=")[1] for ln in capsys.readouterr().out.splitlines() if "SeaTunnelRow#kind=" in ln]
    assert sorted(printed[:3]) == ["INSERT : 1, a, 1", "INSERT : 2, b, 2", "INSERT : 3, c, 3"]  # version 0
    assert printed[3:] == ["UPDATE_BEFORE : 2, b, 2", "UPDATE_AFTER : 2, B, 20", "DELETE : 1, a, 1", "INSERT : 4, d, 4"]


    # the declared schema is checked against the table's when the query starts
    def read(fields, path=src):
        plugin = Delta(DeltaSourceOptions.model_validate({"path": path, "schema": {"table": "t", "fields": fields}}))
        return plugin.read(SimpleNamespace(spark=spark, dataset=plugin.output(), streaming=False))

    df = read({"ID": "bigint", "qty": "decimal(12,0)"})  # names match case-insensitively; int widens
    assert df.columns == ["__table", "__kind", "__seq", "ID", "qty"] and df.isStreaming
    with pytest.raises(SchemaError) as e:
        read({"id": "bigint", "email": "string"})
    assert (e.value.condition, e.value.params["column"], e.value.params["available"]) == ("SCHEMA.MISSING_COLUMN", "email", "id, name, qty")
    with pytest.raises(SchemaError, match="column 'qty' is int in the table but the schema declares smallint"):
        read({"qty": "smallint"})
    with pytest.raises(SchemaError, match="no Delta table"):
        read({"id": "bigint"}, path=str(tmp_path / "nothing"))
