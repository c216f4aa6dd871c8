"""scripts/compile_pyspark_zips.py: bytecode in the archives Spark's Python workers import pyspark from."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("compile_pyspark_zips", ROOT / "scripts" / "compile_pyspark_zips.py")
czip = importlib.util.module_from_spec(spec)
spec.loader.exec_module(czip)


def _import_from(archive: Path, module: str) -> str:
    """What a worker started with PYTHONPATH=<archive> imports ``module`` from, and its value."""
    code = f"import sys; sys.path.insert(0, {str(archive)!r}); import {module} as m; print(m.__file__, m.VALUE)"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_modules_import_from_the_bytecode_added_and_never_from_a_stale_one(tmp_path):
    archive = tmp_path / "lib.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("pkg/__init__.py", "")
        zf.writestr("pkg/mod.py", "VALUE = 1\n")
        zf.writestr("pkg/data.txt", "kept")
    assert _import_from(archive, "pkg.mod").endswith("pkg/mod.py 1")  # before: compiled from source
    assert czip.compile_archive(archive) == 2
    assert czip.compile_archive(archive) == 0  # idempotent
    assert _import_from(archive, "pkg.mod").endswith("pkg/mod.pyc 1")
    with zipfile.ZipFile(archive) as zf:
        assert zf.read("pkg/data.txt") == b"kept" and zf.read("pkg/mod.py") == b"VALUE = 1\n"
        entries = {i.filename: zf.read(i) for i in zf.infolist()}
    entries["pkg/mod.py"] = b"VALUE = 2\n"  # the source changes, its old .pyc stays beside it
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    assert _import_from(archive, "pkg.mod").endswith("pkg/mod.py 2")  # hash-checked: the stale .pyc is not used


def test_the_checkouts_pyspark_archive_holds_bytecode_a_worker_uses():
    archive = next(p for p in czip.archives() if p.name == "pyspark.zip")  # bootstrap compiled it
    code = f"import sys; sys.path.insert(0, {str(archive)!r}); import pyspark.daemon as d; print(d.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out.startswith(str(archive)) and out.endswith("pyspark/daemon.pyc"), out
