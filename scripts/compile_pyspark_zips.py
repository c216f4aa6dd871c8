"""Add bytecode to the pyspark.zip and py4j zip that Spark puts first on every Python worker's path.

Spark starts each Python worker (the daemons and workers of UDFs and Python data sources, the planner
runners, the streaming-source runner) with ``PYTHONPATH=$SPARK_HOME/python/lib/pyspark.zip:...``, so
pyspark is imported from the zip, and Python caches no bytecode for modules in a zip: each worker
compiles pyspark again. Measured here (2026-12-02): ``import pyspark.daemon,
pyspark.sql.worker.plan_data_source_read`` costs 1.7 CPU-s from the zip, 0.55 s from site-packages;
a one-epoch local job starts ten such processes. zipimport takes ``mod.pyc`` stored beside
``mod.py`` in the archive; the .pyc files written here are hash-checked against their source in the
same archive (PEP 552), so a stale one is never used, and an interpreter of another version ignores
them (another magic number) and compiles as before. The archives stay what they were otherwise (the
same .py entries, the same paths): YARN ships this pyspark.zip to its containers unchanged in meaning.

Idempotent: an archive already holding bytecode for this interpreter is left alone (a reinstalled
pyspark brings fresh archives, compiled again on the next bootstrap). Run by scripts/bootstrap.sh
and the Docker image's build.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import zipfile
from importlib import _bootstrap_external  # the stdlib's own pyc writer, as py_compile uses it
from pathlib import Path

MARK = "pyspark/__init__.pyc"


def archives() -> list[Path]:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SystemExit("compile_pyspark_zips: pyspark is not installed in this interpreter")
    lib = Path(spec.origin).parent / "python" / "lib"
    return sorted(lib.glob("*.zip"))


def _has_bytecode(zf: zipfile.ZipFile) -> bool:
    names = [n for n in zf.namelist() if n.endswith(".pyc")]
    if not names:
        return False
    return zf.read(names[0])[:4] == importlib.util.MAGIC_NUMBER


def compile_archive(path: Path) -> int:
    """Rewrite ``path`` with a hash-checked .pyc beside each .py; returns how many were added."""
    with zipfile.ZipFile(path) as zf:
        if _has_bytecode(zf):
            return 0
        entries = [(info, zf.read(info)) for info in zf.infolist() if not info.filename.endswith(".pyc")]
    added = []
    for info, data in entries:
        if not info.filename.endswith(".py"):
            continue
        try:  # the file name zipimport gives a module of this archive (tracebacks read the same)
            code = compile(data, os.path.join(str(path), info.filename), "exec", dont_inherit=True)
        except SyntaxError:  # a module this interpreter cannot compile (e.g. for another version): source only
            continue
        pyc = _bootstrap_external._code_to_hash_pyc(code, importlib.util.source_hash(data), checked=True)
        added.append((info.filename[:-3] + ".pyc", bytes(pyc), info.date_time))
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w") as out:
            for info, data in entries:
                out.writestr(info, data)
            for name, data, date_time in added:
                out.writestr(zipfile.ZipInfo(name, date_time), data, compress_type=zipfile.ZIP_STORED)
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)  # a worker starting meanwhile reads the old archive or the new one, whole
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(added)


def main() -> int:
    for path in archives():
        n = compile_archive(path)
        if n:
            print(f"compile_pyspark_zips: {path.name}: bytecode for {n} modules", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
