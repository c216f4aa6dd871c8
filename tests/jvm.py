"""JVM flags of the test suite's short-lived JVMs (Spark drivers and executors, Kafka, Debezium, s3proxy)."""

# C1-only JIT: ~35 % faster for short test workloads (measured 37 s vs 55 s on a small
# Delta round trip); wrong for throughput runs, so tests only. C1 alone reserves a
# 48 MB code cache (tiered: 240 MB) and never flushes what it compiled: a CDC driver
# (Kafka, four MERGE targets) used 58 MB within 40 s and then failed with
# "Out of space in CodeCache for method handle intrinsic". Reserve what tiered does.
C1_ONLY = ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m"]
C1_ONLY_OPTS = " ".join(C1_ONLY)
