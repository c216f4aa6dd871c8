"""Names the LocalFile sink gives its files and partition directories (SeaTunnel's rules).

- ``file_name_expression`` (with ``custom_filename = true``): ``${transactionId}``,
  ``${now}`` (formatted with ``filename_time_format``, a Java
  ``DateTimeFormatter`` pattern; the pattern itself is a placeholder too, e.g.
  ``${yyyy.MM.dd}``) and ``${uuid}``; an expression without ``${transactionId}``
  gets ``${transactionId}_`` in front (SeaTunnel does so whenever
  ``is_enable_transaction`` is true, which it always is here).
- ``partition_dir_expression``: ``${kN}`` (the N-th partition column's name) and
  ``${vN}`` (its value, escaped as Spark escapes partition directory names;
  null: ``null``).

Everything is checked at plan time (:func:`check_file_name_expression`,
:func:`check_partition_dir_expression`) and rendered at staging time.
"""

from __future__ import annotations

import re
from datetime import datetime

TRANSACTION = "transactionId"
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"

# -- Java DateTimeFormatter patterns ------------------------------------------
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]  # fmt: skip
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_LETTERS = "yuMdDHhmsSaE"


def time_pattern(pattern: str) -> list[tuple[str, str]]:
    """Tokens of a Java ``DateTimeFormatter`` pattern: ("lit", text) or (letter, run);
    ValueError for what :func:`format_time` cannot render."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ValueError(f"unclosed quote in time pattern {pattern!r}")
            tokens.append(("lit", pattern[i + 1 : end] if end > i + 1 else "'"))
            i = end + 1
        elif ch.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == ch:
                j += 1
            if ch not in _LETTERS:
                raise ValueError(
                    f"time pattern {pattern!r}: letter {ch!r} is not supported; use y, M, d, H, h, m, s, S, a, E, D "
                    "(e.g. yyyy.MM.dd or yyyyMMddHHmmss), quote literal text as 'text'"
                )
            tokens.append((ch, pattern[i:j]))
            i = j
        elif ch in "[]{}#":
            raise ValueError(f"time pattern {pattern!r}: {ch!r} is reserved; quote it as '{ch}'")
        else:
            tokens.append(("lit", ch))
            i += 1
    return tokens


def format_time(tokens: list[tuple[str, str]], when: datetime) -> str:
    out = []
    for kind, run in tokens:
        n = len(run)
        if kind == "lit":
            out.append(run)
        elif kind in "yu":
            out.append(f"{when.year % 100:02d}" if n == 2 else f"{when.year:0{n}d}")
        elif kind == "M":
            out.append(_MONTHS[when.month - 1][:3] if n == 3 else _MONTHS[when.month - 1] if n >= 4 else f"{when.month:0{n}d}")
        elif kind == "E":
            out.append(_DAYS[when.weekday()] if n >= 4 else _DAYS[when.weekday()][:3])
        elif kind == "a":
            out.append("AM" if when.hour < 12 else "PM")
        elif kind == "S":
            out.append(f"{when.microsecond:06d}"[:n].ljust(n, "0"))
        else:
            value = {"d": when.day, "D": when.timetuple().tm_yday, "H": when.hour, "h": (when.hour % 12) or 12,
                     "m": when.minute, "s": when.second}[kind]  # fmt: skip
            out.append(f"{value:0{n}d}")
    return "".join(out)


# -- file names ---------------------------------------------------------------
def full_file_expression(expression: str) -> str:
    """SeaTunnel's rule: the transaction id heads a name that does not hold it."""
    return expression if "${" + TRANSACTION + "}" in expression else "${" + TRANSACTION + "}_" + expression


def check_file_name_expression(expression: str, time_format: str) -> None:
    time_pattern(time_format)
    if "/" in expression or "\\" in expression:
        raise ValueError("file_name_expression names a file; it cannot hold a path separator (use partition_dir_expression)")
    known = {TRANSACTION, "now", "uuid", time_format}
    for name in _PLACEHOLDER.findall(expression):
        if name not in known:
            raise ValueError(
                f"file_name_expression: unknown placeholder ${{{name}}}; use ${{transactionId}}, ${{now}}, ${{uuid}} "
                f"or ${{{time_format}}}"
            )
    if expression.startswith(("_", ".")):
        raise ValueError("file_name_expression starts with '_' or '.': readers (Spark, the LocalFile source) skip such files")


def render_file_name(expression: str, time_format: str, transaction_id: str, when: datetime, uuid: str) -> str:
    now = format_time(time_pattern(time_format), when)
    values = {TRANSACTION: transaction_id, "now": now, "uuid": uuid, time_format: now}
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], full_file_expression(expression))


# -- partition directories ----------------------------------------------------
def check_partition_dir_expression(expression: str, partitions: int) -> None:
    for name in _PLACEHOLDER.findall(expression):
        m = re.fullmatch(r"([kv])(\d+)", name)
        if m is None:
            raise ValueError(
                f"partition_dir_expression: unknown placeholder ${{{name}}}; use ${{k0}}, ${{v0}}, ... (the N-th "
                "partition_by column's name and value)"
            )
        if int(m.group(2)) >= partitions:
            raise ValueError(f"partition_dir_expression: ${{{name}}} names partition {m.group(2)}, but partition_by "
                             f"lists {partitions} column(s) (${{k0}} is the first)")  # fmt: skip
    for segment in expression.split("/"):
        if segment in (".", "..") or segment.startswith(("_", ".")) and segment != "":
            raise ValueError(f"partition_dir_expression: directory {segment!r} would be skipped by readers or leave "
                             "path; start directory names with a letter, digit or placeholder")  # fmt: skip
    if expression.startswith("/"):
        raise ValueError("partition_dir_expression is relative to path; remove the leading '/'")


def render_partition_dir(expression: str, keys: list[str], values: list[str]) -> str:
    """``values`` as Spark wrote them in the staged directory names (escaped)."""
    shown = ["null" if v == HIVE_NULL else v for v in values]

    def value(m: re.Match) -> str:
        kind, index = m.group(1)[0], int(m.group(1)[1:])
        return keys[index] if kind == "k" else shown[index]

    rendered = _PLACEHOLDER.sub(value, expression)
    parts = [p for p in rendered.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"partition directory {rendered!r} holds '.' or '..'")
    return "/".join(parts)


def hive_dir(keys: list[str], values: list[str]) -> str:
    """SeaTunnel's default partition_dir_expression, ``${k0}=${v0}/${k1}=${v1}/...``, as Spark lays it out."""
    return "/".join(f"{escape_path_name(k)}={v}" for k, v in zip(keys, values))


_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^')


def escape_path_name(name: str) -> str:
    """Spark's ``ExternalCatalogUtils.escapePathName``."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in name)
