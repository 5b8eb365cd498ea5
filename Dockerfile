# The hoodied image: the daemon (`hoodied run --config /etc/hoodied/hoodied.yaml`, the default command, or
# any other hoodied command as the arguments), and the same image as Spark's executor image on Kubernetes
# (spark.kubernetes.container.image): Spark starts executor pods with the argument `executor`, which
# deploy/docker/entrypoint.sh turns into Spark's executor backend from the installed pyspark.
#
#   docker build -t hoodied:0.1.0 .        (BuildKit, the default builder: COPY --chmod)
#   docker run --rm -p 9464:9464 -v "$PWD/config/docker.yaml:/etc/hoodied/hoodied.yaml:ro" \
#       -v /data/hudi:/data/hudi hoodied:0.1.0
FROM python:3.11-slim-bookworm

# Java 17 for Spark (the driver in hoodied, the executors on Kubernetes). tini is PID 1: it forwards SIGTERM
# to hoodied (which drains) and reaps what the JVM and Spark's Python workers leave behind.
# (man1 first: the JRE's alternatives link man pages, and the slim image has no man folders.)
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/hoodied/src
COPY pyproject.toml README.md ./
COPY core/ core/
COPY services/ services/
RUN pip install --no-cache-dir . \
    && hoodied --help > /dev/null

COPY --chmod=0755 deploy/docker/entrypoint.sh /usr/local/bin/hoodied-entrypoint

# Not root: uid/gid 10001 (numeric in USER, so that Kubernetes' runAsNonRoot can check it). Spark needs a
# writable home and /tmp (its local folders); the configuration is mounted read-only.
RUN groupadd --system --gid 10001 hoodied \
    && useradd --system --uid 10001 --gid hoodied --create-home --home-dir /home/hoodied \
        --shell /usr/sbin/nologin hoodied \
    && mkdir -p /etc/hoodied
USER 10001:10001
WORKDIR /home/hoodied

# /metrics (Prometheus), /healthz (liveness), /readyz (readiness), /status.
EXPOSE 9464

# No Docker health check: Kubernetes ignores it and probes /healthz and /readyz on port 9464 itself, and
# the same image also runs Spark executors, which serve no such endpoint.
HEALTHCHECK NONE

ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/hoodied-entrypoint"]
CMD ["run", "--config", "/etc/hoodied/hoodied.yaml"]
