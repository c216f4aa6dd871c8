#!/usr/bin/env bash
# Entry point of the engine's image on Kubernetes. Spark's Kubernetes backend
# starts the driver pod with `driver <spark-submit arguments>` and executor
# pods with `executor` and their settings in SPARK_* environment variables
# (see Spark's "Running on Kubernetes" guide); anything else runs as given.
set -euo pipefail

case "${1:-}" in
    driver)
        shift
        exec "$SPARK_HOME/bin/spark-submit" \
            --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}" \
            --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
            --deploy-mode client "$@"
        ;;
    executor)
        shift
        # Spark passes the executor's JVM options as SPARK_JAVA_OPT_<n>=<option>, in the order of n
        mapfile -t java_opts < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^SPARK_JAVA_OPT_[0-9]*=//')
        exec java "${java_opts[@]}" -Xms"${SPARK_EXECUTOR_MEMORY}" -Xmx"${SPARK_EXECUTOR_MEMORY}" \
            -cp "${SPARK_CLASSPATH:-}:$SPARK_HOME/jars/*:${STREAMING_ENGINE_JARS_DIR:-/opt/streaming-engine/.jars}/*" \
            org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
            --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" \
            --cores "$SPARK_EXECUTOR_CORES" --app-id "$SPARK_APPLICATION_ID" \
            --hostname "$SPARK_EXECUTOR_POD_IP" --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
            --podName "${SPARK_EXECUTOR_POD_NAME:-}"
        ;;
    *)
        exec "$@"
        ;;
esac
