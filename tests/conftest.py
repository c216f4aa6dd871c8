"""One SparkSession for the whole test run (start-up costs ~10 s; share it)."""

from __future__ import annotations

import os

import pytest

from tests.jvm import C1_ONLY_OPTS

# Set STREAMING_ENGINE_TEST_JVM_OPTS="" to run the tests with the default JIT.
TEST_JVM_OPTS = os.environ.get("STREAMING_ENGINE_TEST_JVM_OPTS", C1_ONLY_OPTS)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from streaming_engine.runtime.session import build_spark_session

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = build_spark_session(
        "streaming-engine-tests",
        conf={
            "spark.sql.warehouse.dir": str(warehouse),  # keep managed tables out of the checkout
            "spark.driver.extraJavaOptions": TEST_JVM_OPTS,
        },
    )
    yield session
    session.stop()


def pytest_terminal_summary(terminalreporter):
    """Print what the real-component tests ran (tables, records, kills), also
    when they pass: tests add it with ``record_property("ran", "...")``."""
    lines = [
        f"{report.nodeid.split('::')[-1]}: {value}"
        for outcome in ("passed", "failed")
        for report in terminalreporter.stats.get(outcome, [])
        if report.when == "call"
        for key, value in report.user_properties
        if key == "ran"
    ]
    if lines:
        terminalreporter.section("what the real-component tests ran")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(config, items):
    """Files with long tests first (crash tests, then real servers and clusters):
    scripts/test.sh runs the files on two xdist workers in this order, so the
    long ones start early instead of leaving one worker alone at the end."""
    def rank(item) -> int:
        return 0 if item.get_closest_marker("soak") else 1 if item.get_closest_marker("components") else 2

    files: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        files[path] = min(files.get(path, 2), rank(item))
    items.sort(key=lambda item: files[item.nodeid.split("::")[0]])  # stable: files keep their order within a rank
