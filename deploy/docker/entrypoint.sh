#!/usr/bin/env bash
# The hoodied image's entrypoint. One image serves two roles:
#
#   <entrypoint> executor      a Spark executor on Kubernetes. Spark's Kubernetes scheduler starts executor
#                              pods from the image with the single argument `executor` and the SPARK_* variables
#                              below; this starts Spark's KubernetesExecutorBackend through `spark-class` of
#                              the installed pyspark (pyspark's pip package ships spark-class and the jars,
#                              not Spark's own image entrypoint).
#   <entrypoint> ARGS...       anything else: `hoodied ARGS...` (the image's CMD: run --config FILE).
#
# Executor variables (set by Spark on the pod): SPARK_DRIVER_URL, SPARK_EXECUTOR_ID, SPARK_EXECUTOR_CORES,
# SPARK_EXECUTOR_MEMORY, SPARK_APPLICATION_ID, SPARK_EXECUTOR_POD_IP (required); SPARK_RESOURCE_PROFILE_ID
# (default 0), SPARK_EXECUTOR_POD_NAME, SPARK_JAVA_OPT_0, _1, ... (the executor's JVM options: its
# extraJavaOptions and the Spark settings an executor needs at start-up), SPARK_CLASSPATH (its
# extraClassPath), SPARK_EXTRA_CLASSPATH. SPARK_HOME, when unset or not a Spark home, is pyspark's package
# folder.
#
# What differs from Spark's own entrypoint, and why: spark-class's launcher gives a class it does not know
# (KubernetesExecutorBackend is one) the heap of SPARK_DRIVER_MEMORY and no JVM options from the environment,
# so SPARK_DRIVER_MEMORY is set to SPARK_EXECUTOR_MEMORY (the heap's maximum; Spark's entrypoint also sets the
# minimum) and the SPARK_JAVA_OPT_n options go to the JVM through JDK_JAVA_OPTIONS (the `java` launcher
# prepends them to its arguments and prints them on standard error, as Spark's entrypoint prints its whole
# command). They reach spark-class's own short-lived launcher JVM (128 MB heap) too: heap sizes do not belong
# in spark.executor.extraJavaOptions. Extra class path entries are appended to the class path
# (SPARK_DIST_CLASSPATH) rather than put before Spark's jars.
#
# HOODIED_ENTRYPOINT_DRY_RUN=1 prints the command, shell-quoted on one line, instead of running it.
set -euo pipefail

readonly EXECUTOR_BACKEND=org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend

die() {
    echo "hoodied-entrypoint: $*" >&2
    exit 64
}

run() {
    if [[ "${HOODIED_ENTRYPOINT_DRY_RUN:-}" == 1 ]]; then
        local line="" arg
        for arg in "$@"; do
            line+="${line:+ }$(printf '%q' "$arg")"
        done
        printf '%s\n' "$line"
        exit 0
    fi
    exec "$@"
}

# One argument in the grammar of JDK_JAVA_OPTIONS: white space separates arguments, quotes group and are
# removed, adjacent quoted pieces join, and there are no escapes. So: the whole argument in double quotes,
# each double quote in it written as '"' between two double-quoted pieces.
java_option() {
    local dq='"' sq="'"
    local joint="${dq}${sq}${dq}${sq}${dq}"
    printf '%s' "${dq}${1//${dq}/${joint}}${dq}"
}

spark_home() {
    if [[ -n "${SPARK_HOME:-}" && -x "${SPARK_HOME}/bin/spark-class" ]]; then
        printf '%s' "$SPARK_HOME"
        return
    fi
    python3 -c 'import os, pyspark; print(os.path.dirname(os.path.abspath(pyspark.__file__)))' ||
        die "executor: cannot find pyspark (is the hoodied package installed?)"
}

executor() {
    local name
    for name in SPARK_DRIVER_URL SPARK_EXECUTOR_ID SPARK_EXECUTOR_CORES SPARK_EXECUTOR_MEMORY \
        SPARK_APPLICATION_ID SPARK_EXECUTOR_POD_IP; do
        if [[ -z "${!name:-}" ]]; then
            die "executor: $name is not set (Spark sets it on the executor pods it starts)"
        fi
    done
    local home
    home="$(spark_home)"
    if [[ ! -x "$home/bin/spark-class" ]]; then
        die "executor: $home/bin/spark-class is missing"
    fi

    local java_options="${JDK_JAVA_OPTIONS:-}" names
    names="$(compgen -e | grep -E '^SPARK_JAVA_OPT_[0-9]+$' | sort -t_ -k4,4n || true)"
    for name in $names; do
        if [[ -n "${!name}" ]]; then
            java_options+="${java_options:+ }$(java_option "${!name}")"
        fi
    done

    local classpath="${SPARK_DIST_CLASSPATH:-}" extra
    for extra in "${SPARK_CLASSPATH:-}" "${SPARK_EXTRA_CLASSPATH:-}"; do
        if [[ -n "$extra" ]]; then
            classpath+="${classpath:+:}${extra}"
        fi
    done

    local command=(
        env
        "SPARK_HOME=$home"
        "SPARK_DRIVER_MEMORY=$SPARK_EXECUTOR_MEMORY"
        "JDK_JAVA_OPTIONS=$java_options"
    )
    if [[ -n "$classpath" ]]; then
        command+=("SPARK_DIST_CLASSPATH=$classpath")
    fi
    command+=(
        "$home/bin/spark-class" "$EXECUTOR_BACKEND"
        --driver-url "$SPARK_DRIVER_URL"
        --executor-id "$SPARK_EXECUTOR_ID"
        --cores "$SPARK_EXECUTOR_CORES"
        --app-id "$SPARK_APPLICATION_ID"
        --hostname "$SPARK_EXECUTOR_POD_IP"
        --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}"
    )
    if [[ -n "${SPARK_EXECUTOR_POD_NAME:-}" ]]; then
        command+=(--podName "$SPARK_EXECUTOR_POD_NAME")
    fi
    run "${command[@]}" "$@"
}

if [[ "${1:-}" == executor ]]; then
    shift
    executor "$@"
fi
run hoodied "$@"
