"""The engine's local file system (streaming_engine/runtime/jvm): Hadoop's
LocalFileSystem/LocalFs with chmod and readlink done through java.nio instead
of a child process each. It must be what local sessions use, and behave like
Hadoop's own for permissions, symlinks and renames."""

from __future__ import annotations

import os
import stat

import pytest

from streaming_engine.runtime import session as session_mod

pytestmark = pytest.mark.spark


def test_local_sessions_get_the_jar_on_the_driver_class_path_and_the_two_settings(monkeypatch):
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    jar = session_mod.engine_jar()
    assert jar is not None, "scripts/bootstrap.sh builds .jars/engine/streaming-engine-jvm.jar"
    conf = session_mod.session_conf("local[2]", {"spark.driver.extraClassPath": "/opt/extra.jar"})
    assert conf["spark.driver.extraClassPath"] == f"{jar}{os.pathsep}/opt/extra.jar"
    for key, value in session_mod.LOCAL_FS_CONF.items():
        assert conf[key] == value
    # a cluster master: executors would not have the class
    assert not set(session_mod.LOCAL_FS_CONF) & set(session_mod.session_conf("yarn"))
    # inside spark-submit the JVM runs already: spark-submit.sh passes them itself
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "1")
    assert session_mod.local_fs_conf("local[2]") == {}
    # the user may pick another implementation
    assert session_mod.session_conf("local", {"spark.hadoop.fs.file.impl": "x.Y"})["spark.hadoop.fs.file.impl"] == "x.Y"


def _jvm(spark):
    return spark._jvm, spark._jsc.hadoopConfiguration()


def test_the_session_uses_it_for_file_system_and_file_context(spark):
    jvm, conf = _jvm(spark)
    uri = jvm.java.net.URI("file:///")
    assert jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf).getClass().getName() == "io.streamingengine.hadoop.NioLocalFileSystem"
    fc = jvm.org.apache.hadoop.fs.FileContext.getFileContext(uri, conf)
    assert fc.getDefaultFileSystem().getClass().getName() == "io.streamingengine.hadoop.NioLocalFs"


def test_set_permission_sets_the_mode_bits(spark, tmp_path):
    jvm, conf = _jvm(spark)
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    f = tmp_path / "f"
    f.write_text("x")
    for mode in (0o640, 0o755, 0o600, 0o000, 0o777):
        fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(f)), jvm.org.apache.hadoop.fs.permission.FsPermission(mode))
        assert stat.S_IMODE(os.stat(f).st_mode) == mode
    d = tmp_path / "sticky"
    d.mkdir()
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(d)), jvm.org.apache.hadoop.fs.permission.FsPermission(0o1777))
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o1777  # falls back to chmod for the sticky bit
    with pytest.raises(Exception, match="FileNotFoundException"):
        fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(tmp_path / "missing")), jvm.org.apache.hadoop.fs.permission.FsPermission(0o600))
    # mkdirs with a permission applies it (RawLocalFileSystem calls setPermission)
    made = tmp_path / "made"
    assert fs.mkdirs(jvm.org.apache.hadoop.fs.Path(str(made)), jvm.org.apache.hadoop.fs.permission.FsPermission(0o750))
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o750


def test_file_link_status_of_files_links_and_missing_paths(spark, tmp_path):
    jvm, conf = _jvm(spark)
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    Path = jvm.org.apache.hadoop.fs.Path
    f = tmp_path / "data"
    f.write_text("hello")
    link = tmp_path / "link"
    link.symlink_to(f)
    st = fs.getFileLinkStatus(Path(str(f)))
    assert not st.isSymlink() and st.isFile() and st.getLen() == 5
    st = fs.getFileLinkStatus(Path(str(link)))
    assert st.isSymlink()
    assert st.getSymlink().toUri().getPath() == str(f)
    assert fs.getFileLinkStatus(Path(str(tmp_path))).isDirectory()
    with pytest.raises(Exception, match="FileNotFoundException"):
        fs.getFileLinkStatus(Path(str(tmp_path / "missing")))


def test_file_context_rename_with_overwrite(spark, tmp_path):
    """Delta's log store and Spark's checkpoint files publish through this call."""
    jvm, conf = _jvm(spark)
    fc = jvm.org.apache.hadoop.fs.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)
    Path = jvm.org.apache.hadoop.fs.Path
    src, dst = tmp_path / "a.tmp", tmp_path / "a"
    src.write_text("new")
    dst.write_text("old")
    overwrite = jvm.org.apache.hadoop.fs.Options.Rename.OVERWRITE
    opts = spark.sparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
    opts[0] = overwrite
    fc.rename(Path(str(src)), Path(str(dst)), opts)
    assert dst.read_text() == "new" and not src.exists()
    src.write_text("again")
    with pytest.raises(Exception, match="FileAlreadyExistsException"):
        fc.rename(Path(str(src)), Path(str(dst)), spark.sparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 0))


def test_jvm_class_finds_classes_once_and_none_for_missing_ones(spark):
    from streaming_engine import jvm as jvm_mod

    jvm = spark._jvm
    found = jvm_mod.jvm_class(jvm, "java.util.ArrayList")
    assert found is not None and found().size() == 0
    assert jvm_mod.jvm_class(jvm, "java.util.ArrayList") is found  # cached
    assert jvm_mod.jvm_class(jvm, "io.streamingengine.NoSuchClass") is None
