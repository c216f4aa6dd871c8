"""One SparkSession for the whole test run (start-up costs ~10 s; share it)."""

from __future__ import annotations

import os

import pytest

from tests import jvm

# Set STREAMING_ENGINE_TEST_JVM_OPTS="" to run the tests with the default JIT (and no class-data archive);
# they set the JVM options of the drivers the tests start, the shared session always gets the full JIT.
JVM_OPTS_ENV = "STREAMING_ENGINE_TEST_JVM_OPTS"


def pytest_configure(config):
    """Every Spark driver the tests start, in this process or in a child
    (``streaming-engine run``, spark-submit), gets the test JVM options through
    SPARK_SUBMIT_OPTS, which Spark's launcher adds to the driver's command.
    The first run builds the class-data archive they start from (tests/jvm.py),
    in the controller before the xdist workers start."""
    if not hasattr(config, "workerinput") and JVM_OPTS_ENV not in os.environ:
        jvm.build_cds_archive()
    opts = os.environ.get(JVM_OPTS_ENV, jvm.driver_opts())
    if opts:
        os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {opts}".strip()


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from streaming_engine.runtime.session import build_spark_session

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = build_spark_session(
        "streaming-engine-tests",
        conf={
            "spark.sql.warehouse.dir": str(warehouse),  # keep managed tables out of the checkout
            "spark.driver.extraJavaOptions": jvm.SHARED_SESSION_OPTS,  # long-lived: the full JIT (tests/jvm.py)
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
