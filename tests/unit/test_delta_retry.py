"""Which Delta conflicts are retried, and what a terminal one says (real Delta exception types)."""

import pytest
from delta.exceptions.base import ConcurrentAppendException, ConcurrentWriteException, ProtocolChangedException

from streaming_engine.checkpoint.delta_txn import with_retries
from streaming_engine.errors import CommitError


def flaky(failures: list[Exception]):
    calls = []

    def fn():
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "ok"

    return fn, calls


def test_retryable_conflicts_are_retried_until_the_write_succeeds():
    fn, calls = flaky([
        ConcurrentAppendException(message="Files were added to the root of the table by a concurrent update."),
        ConcurrentWriteException(message="A concurrent transaction has written new data"),
    ])
    assert with_retries("append to /t", fn, backoff_s=0.001) == "ok"
    assert len(calls) == 3


def test_a_terminal_conflict_fails_naming_the_conflicting_operation():
    msg = 'The protocol version of the Delta table has been changed by a concurrent update. Conflicting commit: {"timestamp":1,"operation":"SET TBLPROPERTIES","isBlindAppend":false}'
    fn, calls = flaky([ProtocolChangedException(message=msg)])
    with pytest.raises(CommitError) as exc:
        with_retries("merge into /t", fn, backoff_s=0.001)
    assert len(calls) == 1
    assert "ProtocolChangedException" in str(exc.value)
    assert "SET TBLPROPERTIES" in str(exc.value)
    assert "merge into /t" in str(exc.value)


def test_retries_give_up_after_the_limit():
    fn, calls = flaky([ConcurrentAppendException(message="again") for _ in range(10)])
    with pytest.raises(CommitError):
        with_retries("append to /t", fn, attempts=3, backoff_s=0.001)
    assert len(calls) == 3


def test_other_errors_are_not_swallowed():
    fn, _ = flaky([ValueError("boom")])
    with pytest.raises(ValueError):
        with_retries("append", fn)
