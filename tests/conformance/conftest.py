"""The examples carry secrets of their own (``password = test`` in a Jdbc
block, say); the engine remembers secret values for the rest of the process
(streaming_engine.redact) and would mask "test" in every later test's output.
Each example forgets what it taught."""

import pytest


@pytest.fixture(autouse=True)
def _forget_the_examples_secrets():
    from streaming_engine import redact

    before = set(redact._known)
    yield
    with redact._known_lock:
        redact._known.intersection_update(before)
