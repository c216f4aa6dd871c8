"""The command line: exit codes, formats, and no tracebacks on bad input."""

import json
import subprocess
import sys
from pathlib import Path

from streaming_engine.cli import main

JOB = """
env { job.name = clijob }
source { TestSource { plugin_output = src, tables = [db.a, db.b] } }
transform { TestMap { plugin_input = src, plugin_output = m } TestPy { plugin_output = p } }
sink { TestSink { plugin_input = p } TestSink { plugin_input = p } }
"""


def write(tmp_path: Path, text: str, name: str = "job.conf") -> str:
    f = tmp_path / name
    f.write_text(text)
    return str(f)


def test_explain_text(tmp_path, capsys):
    assert main(["explain", "-c", write(tmp_path, JOB)]) == 0
    out = capsys.readouterr().out
    assert "Shuffle [TestSource#1]" in out and "TransformChain[TestMap#2->TestPy#3]" in out


def test_explain_json_is_parseable_and_has_three_plans(tmp_path, capsys):
    assert main(["explain", "-c", write(tmp_path, JOB), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["execution"]["pipelines"][0]["name"] == "pipeline-1"
    assert data["logical"]["job"] == "clijob"


def test_name_flag_overrides_the_job_name(tmp_path, capsys):
    assert main(["explain", "-c", write(tmp_path, JOB), "-n", "other", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["physical"]["pipelines"][0]["checkpoint_location"].endswith("/other/src")


def test_check_flag_and_check_command(tmp_path, capsys):
    path = write(tmp_path, JOB)
    assert main(["--check", "-c", path]) == 0
    assert main(["check", "-c", path]) == 0
    assert capsys.readouterr().out.count("OK:") == 2


def test_variables_flag(tmp_path, capsys):
    path = write(tmp_path, JOB.replace("clijob", "${name}"))
    assert main(["check", "-c", path, "-i", "name=fromflag", "--format", "json"]) == 0
    assert main(["explain", "-c", path, "-i", "name=fromflag", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert '"job": "fromflag"' in out


def test_config_errors_exit_1_with_located_messages(tmp_path, capsys):
    path = write(tmp_path, JOB.replace("TestMap {", "TestMapp {"))
    assert main(["check", "-c", path]) == 1
    err = capsys.readouterr().err
    assert "unknown transform plugin 'TestMapp'" in err and "job.conf:4" in err
    assert "Traceback" not in err


def test_strict_turns_unknown_options_into_errors(tmp_path, capsys):
    path = write(tmp_path, JOB.replace("plugin_output = src,", "plugin_output = src, colour = red,"))
    assert main(["check", "-c", path]) == 0
    assert "warning" in capsys.readouterr().err
    assert main(["check", "-c", path, "--strict"]) == 1


def test_json_problem_output(tmp_path, capsys):
    path = write(tmp_path, "source { }")
    assert main(["check", "-c", path, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().err)
    assert {p["condition"] for p in data["problems"]} == {"CONFIG.EMPTY_JOB"}


def test_module_entry_point_reports_a_missing_file_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "streaming_engine", "explain", "-c", str(tmp_path / "missing.conf")],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1
    assert "does not exist" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_config_flag_is_a_usage_error(capsys):
    try:
        main(["explain"])
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("expected a usage error")


def test_client_deploy_mode_is_accepted(tmp_path, capsys):
    path = write(tmp_path, JOB)
    assert main(["check", "-c", path, "-e", "client"]) == 0
    assert main(["check", "-c", path, "--deploy-mode", "client"]) == 0
    assert capsys.readouterr().out.count("OK:") == 2


def test_cluster_deploy_mode_is_refused_not_ignored(tmp_path, capsys):
    path = write(tmp_path, JOB)
    for command in ("run", "check", "explain"):
        assert main([command, "-c", path, "-e", "cluster"]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""  # nothing compiled, nothing run
        assert "deploy mode 'cluster' needs spark-submit" in captured.err
        assert "./spark-submit.sh -e cluster" in captured.err and "-e client" in captured.err


def test_plugins_of_a_name_print_every_kind_that_has_it(capsys):
    assert main(["plugins", "Delta"]) == 0
    out = capsys.readouterr().out
    assert "Delta (source)" in out and "Delta (sink)" in out and "save_mode" in out, out
    assert main(["plugins", "Kafka"]) == 0
    out = capsys.readouterr().out
    assert "Kafka (source)" in out and "Kafka (sink)" in out and "semantics" in out and "start_mode" in out
    assert main(["plugins", "NoSuchPlugin"]) == 1
