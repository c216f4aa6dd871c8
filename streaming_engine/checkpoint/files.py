"""Small text files beside the checkpoints (savepoints, the planned sources), through Hadoop's file
system of their path: local, HDFS or S3A alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def fs(spark: "SparkSession", path: str) -> tuple[Any, Any, Any]:
    """(the JVM, the Hadoop Path, its FileSystem)."""
    jvm = spark._jvm  # type: ignore[attr-defined]
    p = jvm.org.apache.hadoop.fs.Path(path)
    return jvm, p, p.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]


def read_text(spark: "SparkSession", path: str) -> str | None:
    """The file's text; None when there is no such file."""
    jvm, p, f = fs(spark, path)
    try:
        stream = f.open(p)
    except Exception as e:  # noqa: BLE001
        if "FileNotFoundException" in str(e):
            return None
        raise
    try:
        return jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()


def write_text(spark: "SparkSession", path: str, text: str, overwrite: bool = False) -> None:
    _, p, f = fs(spark, path)
    out = f.create(p, overwrite)
    try:
        out.write(bytearray(text.encode()))
    finally:
        out.close()
