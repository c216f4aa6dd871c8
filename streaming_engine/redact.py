"""Keep secrets out of everything the engine shows: plans, logs, errors, status.

Three kinds of secret are recognised:

- URI user-info: ``s3a://KEY:SECRET@bucket/x``, ``jdbc:postgresql://u:pw@h/db``,
  ``https://token@host``; the user-info becomes ``******``;
- values of secret-like option names (:func:`is_secret_key`: password, passwd,
  secret, token, credential, access key, private key, api key,
  sasl.jaas.config), in option trees (:func:`redact_options`) and as
  ``name=value`` / ``"name": "value"`` in free text (:func:`redact_text`);
- values the process has been told about (:func:`remember`, fed by the
  compiled job via :func:`secret_values`: SecretStr options, secret-keyed
  values, URI user-info, ``-i`` variables with secret-like names): replaced
  wherever they appear in text, whatever surrounds them.

Only what leaves the engine is redacted; options keep their real values
inside (a sink still needs the real path).
"""

from __future__ import annotations

import logging
import re
import sys
import threading
from typing import Any, Iterable, Iterator, Mapping, TextIO

from pydantic import BaseModel, SecretStr

MASK = "******"
_MIN_REMEMBERED = 4  # shorter values would mask ordinary words everywhere

_SECRET_WORDS = (
    r"pass(?:word|wd)|pwd|secret|token|credential|(?:access|account|private|api)[._\-]?key|sasl[._\-]jaas[._\-]config"
)
_SECRET_KEY = re.compile(_SECRET_WORDS, re.I)
# scheme://userinfo@ : with a ':' the password may hold '/', as AWS secret keys do
_URI_USERINFO = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<info>[^\s/@:'\"]*:[^\s'\"]*|[^\s/@:'\"]+)@"
)
_ORACLE_THIN = re.compile(r"(?i)(?P<scheme>jdbc:oracle:thin:)(?P<info>[^\s/@:]+/[^\s@]+)@")
# secret_key = value, secret_key: value, "secret_key": "value", ?secret_key=value&
_KEY_VALUE = re.compile(
    # the look-behind anchors the key at a word start: without it a long word
    # is scanned from every position (quadratic: 20k characters took 23 s)
    rf"(?<![A-Za-z0-9_.\-])(?P<key>[A-Za-z0-9_.\-]*(?:{_SECRET_WORDS})[A-Za-z0-9_.\-]*)(?P<sep>[\"']?\s*[=:]\s*)"
    r"(?P<value>\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^\s\"',;&{}\[\]()]+)",
    re.I,
)

# subtrees that hold column names and types, not values: a column named
# "password" is not a secret, and its type "string" must not be remembered
_SCHEMA_KEYS = {"schema", "fields", "columns"}

_known: set[str] = set()
_known_lock = threading.Lock()


def is_secret_key(name: str) -> bool:
    """True for option names whose values are secrets (``fs.s3a.secret.key``, ``db_password``)."""
    return bool(_SECRET_KEY.search(name))


def redact_text(text: str) -> str:
    """``text`` with URI user-info, ``secret_key=value`` pairs and remembered secrets masked."""
    if not text:
        return text
    with _known_lock:
        known = sorted(_known, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, MASK)
    text = _URI_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    text = _ORACLE_THIN.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    return _KEY_VALUE.sub(_mask_pair, text)


def _mask_pair(m: re.Match[str]) -> str:
    if m["value"].strip("\"'") in ("", MASK):
        return m[0]
    quote = m["value"][0] if m["value"][0] in "\"'" else ""
    return f"{m['key']}{m['sep']}{quote}{MASK}{quote}"


def redact_options(value: Any, key: str | None = None) -> Any:
    """A copy of an option tree safe to show: secret-keyed values and SecretStr
    masked (also inside nested maps such as ``kafka.config``), URI user-info
    masked in every string."""
    if value is None:
        return None
    if key in _SCHEMA_KEYS:
        return redact_tree(value)
    if isinstance(value, SecretStr) or (key is not None and is_secret_key(key)):
        return MASK
    if isinstance(value, BaseModel):
        value = {n: getattr(value, n) for n in type(value).model_fields if getattr(value, n) is not None}
    if isinstance(value, Mapping):
        return {k: redact_options(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_options(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def secret_values(value: Any, key: str | None = None) -> Iterator[str]:
    """Every secret string in an option tree (see the module docstring)."""
    if value is None or key in _SCHEMA_KEYS:
        return
    if isinstance(value, SecretStr):
        yield value.get_secret_value()
        return
    if isinstance(value, BaseModel):
        for n, f in type(value).model_fields.items():
            yield from secret_values(getattr(value, n), f.alias or n)
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from secret_values(v, key if key is not None and is_secret_key(key) else str(k))
        return
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from secret_values(v, key)
        return
    if key is not None and is_secret_key(key) and not isinstance(value, bool):
        yield str(value)
    elif isinstance(value, str):
        for pattern in (_URI_USERINFO, _ORACLE_THIN):
            for m in pattern.finditer(value):
                yield m["info"]
                yield from m["info"].split(":", 1)[1:]


def remember(values: Iterable[str]) -> None:
    """Mask these strings in all redacted text from now on (this process)."""
    with _known_lock:
        _known.update(v for v in values if isinstance(v, str) and len(v) >= _MIN_REMEMBERED)


def redact_tree(value: Any) -> Any:
    """Every string in a tree of dicts and lists through :func:`redact_text` (keys kept)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_tree(v) for v in value)
    if isinstance(value, BaseException):
        return redact_text(str(value))
    return value


class RedactingFilter(logging.Filter):
    """Redacts a record's message, arguments and extras (install on handlers)."""

    _STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage())
        record.args = None
        for k, v in list(record.__dict__.items()):
            if k not in self._STANDARD:
                setattr(record, k, redact_tree(v))
        if record.exc_info and record.exc_info[1] is not None:  # the traceback, redacted, joins the message
            record.msg += "\n" + redact_text(logging.Formatter().formatException(record.exc_info))
            record.exc_info = record.exc_text = None
        return True


def install_log_filter(logger: logging.Logger) -> None:
    """Redact every record ``logger``'s handlers emit (child loggers' records included)."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


class RedactingStream:
    """A text stream that redacts what is written to it (the CLI's stdout/stderr)."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class redacting_output:
    """``with redacting_output():`` everything printed to stdout/stderr is redacted."""

    def __enter__(self) -> None:
        self._saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)

    def __exit__(self, *exc: Any) -> None:
        sys.stdout, sys.stderr = self._saved
