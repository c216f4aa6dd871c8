import pytest

from tests.unit.plugins_for_tests import register_all


@pytest.fixture(autouse=True, scope="session")
def _test_plugins():
    register_all()


@pytest.fixture(autouse=True)
def _no_engine_defaults(monkeypatch, tmp_path):
    # tests must not depend on the repo's conf/engine.conf
    monkeypatch.setenv("STREAMING_ENGINE_CONF", str(tmp_path / "absent.conf"))
