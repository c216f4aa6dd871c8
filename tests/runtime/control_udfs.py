"""Python transform functions the control-plane tests inject failures with.

``fail_when_told``: a batch holding rows of table T raises once for each
token file ``<FAULTS>/<T>.fail`` the test creates (the worker takes the token
by renaming it, so one token is one failure, whichever worker sees it).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

FAULTS = Path(tempfile.gettempdir()) / "streaming-engine-udf-faults"


def inject(table: str) -> None:
    FAULTS.mkdir(parents=True, exist_ok=True)
    (FAULTS / f"{table}.fail").write_text("fail once")


def fail_when_told(pdf):
    for table in set(pdf["__table"]) if len(pdf) else ():
        token = FAULTS / f"{table}.fail"
        try:
            os.rename(token, FAULTS / f"{table}.taken-{os.getpid()}-{time.time_ns()}")
        except FileNotFoundError:
            continue
        raise RuntimeError(f"injected failure of {table}")
    return pdf
