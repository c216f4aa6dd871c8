"""Restricted mode: refuse jobs whose plugins run code or read local files.

Every plugin says what it does beyond moving rows (:meth:`Plugin.capabilities`,
from its options): ``runs_code`` (imports or calls code named in the job),
``reads_local_files`` (reads the machine's files), ``writes_local_files``.
Restricted mode, for jobs written by others, refuses the first two, each
offending block reported with the capability and the plugin's reason.

It is on when the CLI gets ``--restricted``, or ``security.restricted = true``
is in the engine defaults (``conf/engine.conf``) or in the job's env. A job can
switch it on for itself but never off: the engine default wins over a job's
``security.restricted = false``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streaming_engine.errors import ConfigError, Location, Problem

if TYPE_CHECKING:  # pragma: no cover
    from streaming_engine.dag.logical import LogicalDag

RUNS_CODE = "runs_code"
READS_LOCAL_FILES = "reads_local_files"
WRITES_LOCAL_FILES = "writes_local_files"
CAPABILITIES = {RUNS_CODE: "running code", READS_LOCAL_FILES: "reading local files", WRITES_LOCAL_FILES: "writing local files"}
FORBIDDEN = (RUNS_CODE, READS_LOCAL_FILES)


def restricted_by(dag: "LogicalDag", flag: bool = False) -> str | None:
    """What switched restricted mode on (for messages), or None when it is off."""
    if flag:
        return "--restricted"
    if _default_on():
        return "security.restricted in the engine defaults"
    if dag.env.security_restricted:
        return "env security.restricted"
    return None


def check(dag: "LogicalDag", flag: bool = False) -> None:
    """ConfigError listing every block restricted mode forbids (a no-op when it is off)."""
    switch = restricted_by(dag, flag)
    if switch is None:
        return
    problems = [
        Problem("CONFIG.RESTRICTED", {"capability": CAPABILITIES[cap], "reason": reason, "switch": switch}, v.location)
        for v in dag.vertices
        for cap, reason in sorted(v.plugin.capabilities().items())
        if cap in FORBIDDEN
    ]
    if dag.env.python_files:
        problems.append(Problem("CONFIG.RESTRICTED", {"capability": CAPABILITIES[RUNS_CODE],
                                                      "reason": "env python.files ships Python modules to run",
                                                      "switch": switch}, Location(None, "env", key="python.files")))
    if problems:
        raise ConfigError(problems)


def _default_on() -> bool:
    from streaming_engine.config.keys import flatten_options
    from streaming_engine.config.models import engine_defaults

    value = flatten_options(engine_defaults(), set()).get("security.restricted", False)
    return value is True or str(value).strip().lower() == "true"
