"""Integration tests that need a local SparkSession (marked ``spark``)."""
