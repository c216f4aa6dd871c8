"""Run independent per-table commits of one sink concurrently.

Delta commits of different tables do not conflict, and most of a small
commit's time is driver-side latency (log write, snapshot update), so a few
threads overlap them. Results keep the input order; the first error is raised
after the others finished (no half-abandoned writes).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_concurrently(fn: Callable[[T], R], items: Iterable[T], max_workers: int) -> list[R]:
    items = list(items)
    if max_workers <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(max_workers, len(items)), thread_name_prefix="commit") as pool:
        futures = [pool.submit(fn, x) for x in items]
        errors = [f.exception() for f in futures]
    for e in errors:
        if e is not None:
            raise e
    return [f.result() for f in futures]
