"""Structured logging: one JSON object per line (or key=value text), extras included.

Log records should carry context as ``extra={...}`` (job, pipeline, phase,
batch); never pass option values that may hold secrets (use
``PluginOptions.public_dict()``, which masks them). Every line is also passed
through :func:`redact.redact_text` as it is written (URI user-info,
``secret=value`` pairs, the job's secret values): a path or error that
carries a credential (a checkpoint on ``s3a://key:secret@...``) is masked
whatever event or message it is in.
"""

from __future__ import annotations

import json
import logging
import sys
import time

from streaming_engine.redact import redact_text

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class _Formatter(logging.Formatter):
    def __init__(self, fmt: str):
        super().__init__()
        self.fmt = fmt

    def format(self, record: logging.LogRecord) -> str:
        extras = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
        base = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
            **extras,
        }
        if record.exc_info:
            base["error"] = self.formatException(record.exc_info)
        if self.fmt == "json":
            return redact_text(json.dumps(base, default=str))
        tail = " ".join(f"{k}={v}" for k, v in extras.items())
        return redact_text(f"{base['ts']} {base['level']:<7} {record.name}: {base['msg']}" + (f" {tail}" if tail else ""))


def configure(fmt: str = "text", level: str = "WARNING") -> None:
    root = logging.getLogger("streaming_engine")
    root.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(fmt))
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False
