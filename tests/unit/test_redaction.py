"""Secrets never leave the engine: redact.py and the edges that use it (no Spark)."""

import json
import logging

import pytest
from prometheus_client import generate_latest
from pydantic import SecretStr

from sinks._placeholders import render as render_placeholders
from streaming_engine import redact
from streaming_engine.checkpoint.ledger import summarize
from streaming_engine.cli import main
from streaming_engine.errors import ConfigError, EngineError, Problem, SchemaError
from streaming_engine.job import compile_text
from streaming_engine.metrics.prometheus import PrometheusMetrics
from streaming_engine.runtime.context import CommitRecord
from streaming_engine.runtime.events import EpochCommitted
from streaming_engine.schema import Column, TableSchema
from streaming_engine.security import check
from tests.unit.plugins_for_tests import TSecretsOptions


@pytest.mark.parametrize("name", ["password", "db_passwd", "PWD", "fs.s3a.secret.key", "fs.s3a.access.key", "accessKey",
                                  "access_key", "api-key", "auth_token", "credentials", "sasl.jaas.config",
                                  "private.key", "fs.azure.account.key.x"])
def test_secret_key_names(name):
    assert redact.is_secret_key(name)


@pytest.mark.parametrize("name", ["path", "table", "primary_key", "keyword", "query", "bootstrap.servers", "user"])
def test_ordinary_key_names(name):
    assert not redact.is_secret_key(name)


@pytest.mark.parametrize("text, secret", [
    ("s3a://AKIAXYZ:abc/def+ghi@bucket/t", "abc/def+ghi"),  # AWS secret keys hold '/'
    ("s3a://AKIAXYZ:abc/def+ghi@bucket/t", "AKIAXYZ"),
    ("jdbc:postgresql://scott:tiger1@db:5432/x", "tiger1"),
    ("jdbc:mysql://db/x?user=u&password=hunter22&ssl=true", "hunter22"),
    ("jdbc:oracle:thin:scott/tiger2@host:1521/x", "tiger2"),
    ("https://ghp_tokenvalue@github.com/o/r", "ghp_tokenvalue"),
    ('error in {"password": "p4ss word"}', "p4ss word"),
    ("{'api_key': 'k3y'}", "k3y"),
    ('required username="u" password="jaaspw";', "jaaspw"),
    ("fs.s3a.secret.key = S3CR", "S3CR"),
])
def test_redact_text_masks_secrets(text, secret):
    out = redact.redact_text(text)
    assert secret not in out and redact.MASK in out


@pytest.mark.parametrize("text", ["file:///tmp/a@b/t", "hdfs://nn:8020/wh/t", "s3a://bucket/t", "/wh/db/t",
                                  "the token is valid", "column password does not exist"])
def test_redact_text_keeps_ordinary_text(text):
    assert redact.redact_text(text) == text


def test_redact_options_masks_nested_maps_secretstr_and_uris_but_not_schemas():
    opts = {
        "path": "s3a://AK:SK@b/t",
        "kafka.config": {"sasl.jaas.config": "x", "bootstrap.servers": "h:9092"},
        "dsn": SecretStr("conn"),
        "schema": {"fields": {"password": "string"}},
        "rows": [1, 2],
    }
    assert redact.redact_options(opts) == {
        "path": "s3a://******@b/t",
        "kafka.config": {"sasl.jaas.config": "******", "bootstrap.servers": "h:9092"},
        "dsn": "******",
        "schema": {"fields": {"password": "string"}},
        "rows": [1, 2],
    }


def test_remembered_secrets_are_masked_anywhere_in_text():
    values = set(redact.secret_values(TSecretsOptions(dsn="DSN-canary-1", password="PW-canary-1",
                                                      config={"token": "TOK-canary-1"},
                                                      endpoint="s3a://AK:SK-canary-1@b/t")))
    assert {"DSN-canary-1", "PW-canary-1", "TOK-canary-1", "SK-canary-1"} <= values
    assert redact.redact_text("bare PW-canary-1") == "bare PW-canary-1"  # not known yet: no pattern matches
    redact.remember(values)
    out = redact.redact_text("bare PW-canary-1, DSN-canary-1 and TOK-canary-1")
    assert "canary" not in out


def test_short_values_are_not_remembered():
    redact.remember(["abc"])
    assert redact.redact_text("abc def") == "abc def"


def test_public_dict_masks_every_kind():
    opts = TSecretsOptions(dsn="DSN-pd", password="PW-pd", config={"nested": {"secret": "SEC-pd"}, "x": 1},
                           endpoint="https://user:URI-pd@h/x")
    shown = json.dumps(opts.public_dict())
    assert not any(s in shown for s in ("DSN-pd", "PW-pd", "SEC-pd", "URI-pd"))
    assert opts.dsn.get_secret_value() == "DSN-pd" and opts.endpoint == "https://user:URI-pd@h/x"  # still usable


def test_engine_errors_and_problems_are_redacted():
    e = EngineError("RUNTIME.FAILED", {"detail": "cannot open s3a://AK:ERR-canary@b/t"})
    assert "ERR-canary" not in str(e)
    assert e.params["detail"].endswith("@b/t")  # params keep the value for the code that reads them
    p = Problem("CONFIG.INVALID_OPTION", {"detail": "bad url jdbc:x://u:PROB-canary@h"})
    assert "PROB-canary" not in str(p) and "PROB-canary" not in json.dumps(p.to_dict())
    assert "PROB-canary" not in str(ConfigError([p]))


def test_log_filter_redacts_message_args_extras_and_traceback(caplog):
    handler = logging.StreamHandler()
    records = []
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("streaming_engine.test_redaction")
    logger.addHandler(handler)
    redact.install_log_filter(logger)
    try:
        try:
            raise ValueError("boom s3a://AK:TB-canary@b")
        except ValueError:
            logger.error("to %s", "s3a://AK:ARG-canary@b", extra={"ctx": {"url": "s3a://AK:EXTRA-canary@b"}},
                         exc_info=True)
    finally:
        logger.removeHandler(handler)
    (r,) = records
    text = logging.Formatter().format(r) + json.dumps(r.ctx)
    assert "to s3a://******@b" in text
    assert not any(c in text for c in ("ARG-canary", "EXTRA-canary", "TB-canary"))


def test_prometheus_labels_are_redacted():
    m = PrometheusMetrics()
    m.on_event(EpochCommitted("job", "p", 0, (CommitRecord("sink", "s3a://AK:LBL-canary@b", "t", 3),), 0.1))
    text = generate_latest(m.registry).decode()
    assert "LBL-canary" not in text and 'table="s3a://******@b"' in text


def test_run_summary_targets_are_redacted():
    (row,) = summarize([("p", 0, [CommitRecord("sink", "t", "file://u:SUM-canary@/tmp/x", 1)])])
    assert row["target"] == "file://******@/tmp/x"


JOB = """
env { job.name = secrets }
source { TestSource { plugin_output = src } }
sink {
  TestSecrets {
    endpoint = "s3a://AKID:${uri_secret}@bucket/t"
    password = "${pw}"
    dsn = "DSN-explain-canary"
    config { client { sasl.jaas.config = "required password=\\"JAAS-explain-canary\\";" } }
  }
}
"""
CANARIES = ("URI-explain-canary", "PW-explain-canary", "DSN-explain-canary", "JAAS-explain-canary", "VAR-explain-canary")


@pytest.mark.parametrize("fmt", ["text", "json", "dot", "mermaid"])
def test_explain_and_check_show_no_secret(tmp_path, capsys, fmt):
    conf = tmp_path / "job.conf"
    conf.write_text(JOB)
    args = ["-c", str(conf), "-i", "uri_secret=URI-explain-canary", "-i", "pw=PW-explain-canary",
            "-i", "api_token=VAR-explain-canary", "--format", fmt]
    assert main(["explain", *args]) == 0
    assert main(["check", *args[:-2]]) == 0
    out = capsys.readouterr()
    assert "TestSecrets" in out.out
    assert not [c for c in CANARIES if c in out.out + out.err]


def test_error_output_shows_no_secret(tmp_path, capsys):
    conf = tmp_path / "job.conf"
    conf.write_text(JOB.replace("password =", "pasword =").replace("endpoint", "endpont"))
    assert main(["check", "--strict", "-c", str(conf), "-i", "uri_secret=URI-err-canary", "-i", "pw=PW-err-canary"]) == 1
    out = capsys.readouterr()
    assert "unknown option 'pasword'" in out.err
    assert "URI-err-canary" not in out.err + out.out and "PW-err-canary" not in out.err + out.out


def _table(table_id):
    return TableSchema(table_id, (Column("id", "bigint"),))


@pytest.mark.parametrize("table_id, placeholder, part", [
    ("db./../../../etc/x", "table_full_name", "'/'"),
    ("db./../../../etc/x", "table_name", "'/etc/x'"),
    ("db..t", "table_full_name", "empty part"),
    ("a\\b", "table_name", "a '\\'"),
    ("db.t\0x", "table_name", "NUL"),
    ("../x.t", "database_name", "empty part"),
])
def test_table_ids_cannot_leave_the_sink_root(table_id, placeholder, part):
    with pytest.raises(SchemaError) as e:
        render_placeholders(f"/wh/${{{placeholder}}}", _table(table_id))
    assert e.value.condition == "SCHEMA.UNSAFE_TABLE_ID"
    assert e.value.params["table"] == table_id and e.value.params["placeholder"] == placeholder
    assert part in e.value.params["detail"]


def test_plain_table_ids_render():
    assert render_placeholders("/wh/${database_name}/${table_name}/${table_full_name}", _table("db.t")) == "/wh/db/t/db.t"


def test_unsafe_table_id_is_a_config_problem_at_the_sink(tmp_path):
    text = """
    source { TestSource { plugin_output = src, tables = ["db./../../etc"] } }
    sink { LocalFile { plugin_input = src, path = "/tmp/wh/${table_full_name}" } }
    """
    with pytest.raises(ConfigError) as e:
        compile_text(text, file="job.conf")
    (p,) = [p for p in e.value.problems if p.condition == "SCHEMA.UNSAFE_TABLE_ID"]
    assert p.location.plugin == "LocalFile" and p.location.section == "sink"
    assert "db./../../etc" in str(p)


RESTRICTED = """
env { %s }
source { FakeSource { plugin_output = f, row.num = 1, schema = { fields { id = bigint, name = string } } } }
transform { %s }
sink { Console { } }
"""


@pytest.mark.parametrize("transform, capability", [
    ('Python { function = "my_udfs:f" }', "running code"),
    ("Sql { query = \"select id, java_method('java.lang.System', 'exit', 1) as x from f\" }", "running code"),
    ("Sql { query = \"select id, reflect('java.lang.Runtime', 'x') as x from f\" }", "running code"),
    ("Sql { query = \"select id, (select value from text.`/etc/passwd`) as x from f\" }", "reading local files"),
])
def test_restricted_mode_refuses_code_and_local_files(transform, capability):
    text = RESTRICTED % ("", transform)
    job = compile_text(text, file="job.conf")  # allowed when not restricted
    assert job.dag.vertex([v.id for v in job.dag.vertices if v.kind == "transform"][0])
    with pytest.raises(ConfigError) as e:
        compile_text(text, file="job.conf", restricted=True)
    (p,) = e.value.problems
    assert p.condition == "CONFIG.RESTRICTED" and p.params["capability"] == capability
    assert p.location.section == "transform" and "--restricted" in str(p)


def test_restricted_mode_allows_plain_sql_and_is_switched_on_by_env():
    compile_text(RESTRICTED % ("security.restricted = true", 'Sql { query = "select id, upper(name) as n from f" }'))
    with pytest.raises(ConfigError) as e:
        compile_text(RESTRICTED % ("security.restricted = true", 'Python { function = "m:f" }'))
    assert "env security.restricted" in str(e.value)


def test_a_job_cannot_switch_off_the_engine_default(tmp_path, monkeypatch):
    defaults = tmp_path / "engine.conf"
    defaults.write_text("env { security.restricted = true }")
    monkeypatch.setenv("STREAMING_ENGINE_CONF", str(defaults))
    with pytest.raises(ConfigError) as e:
        compile_text(RESTRICTED % ("security.restricted = false", 'Python { function = "m:f" }'))
    assert "engine defaults" in str(e.value)


def test_local_file_source_reads_local_files(tmp_path):
    text = f"""
    source {{ LocalFile {{ plugin_output = f, path = "{tmp_path}", file_format_type = text }} }}
    sink {{ Console {{ }} }}
    """
    job = compile_text(text)
    assert "reads_local_files" in job.dag.vertices[0].plugin.capabilities()
    with pytest.raises(ConfigError):
        check(job.dag, flag=True)


def test_cli_restricted_flag(tmp_path, capsys):
    conf = tmp_path / "job.conf"
    conf.write_text(RESTRICTED % ("", 'Python { function = "m:f" }'))
    assert main(["check", "-c", str(conf)]) == 0
    assert main(["check", "-c", str(conf), "--restricted"]) == 1
    err = capsys.readouterr().err
    assert "restricted mode forbids running code" in err and "transform[1] Python" in err


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_every_log_line_is_redacted_whatever_carries_the_secret(fmt, capsys):
    """A credential in a path of an event (PipelineStarted's checkpoint) or in a
    message is masked by the formatter itself, in both log formats."""
    import logging

    from streaming_engine import logs

    logs.configure(fmt, "INFO")
    try:
        log = logging.getLogger("streaming_engine.runtime")
        log.info("PipelineStarted", extra={"event": {"checkpoint": "s3a://AKIDLOG:LogSecret-91@bucket/ck"}})
        log.warning("could not open jdbc:postgresql://u:LogPw-91@db/x with password=LogPw2-91")
    finally:
        logging.getLogger("streaming_engine").handlers.clear()
    err = capsys.readouterr().err
    assert "s3a://******@bucket/ck" in err and "PipelineStarted" in err
    assert "LogSecret-91" not in err and "LogPw-91" not in err and "LogPw2-91" not in err
