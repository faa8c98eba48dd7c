# Pulsar Lens: the dashboard and its polling loop, beside a Pulsar cluster.
#   docker build -t pulsar-lens .                          # light analyses only
#   docker build --build-arg WITH_SPARK=1 -t pulsar-lens .  # adds pyspark and a headless JRE 17
#   docker run -p 8501:8501 -e PULSAR_ADMIN_URL=http://broker:8080 pulsar-lens
# Installable plugins go in a derived image: FROM pulsar-lens + pip install <plugin>.
# Drop-in plugin files go in the /plugins volume.

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY core core
COPY collectors collectors
COPY lab lab
COPY plugins plugins
COPY exporter exporter
COPY dashboard dashboard
COPY cli cli
RUN python -m pip wheel --no-deps --wheel-dir /wheels .

FROM python:3.11-slim
ARG WITH_SPARK=0
RUN if [ "$WITH_SPARK" = "1" ]; then \
      apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
      && rm -rf /var/lib/apt/lists/*; \
    fi
COPY --from=build /wheels /wheels
RUN extra=""; if [ "$WITH_SPARK" = "1" ]; then extra="[spark]"; fi; \
    wheel=$(ls /wheels/pulsar_lens-*.whl) && \
    python -m pip install --no-cache-dir "${wheel}${extra}" && rm -rf /wheels
RUN useradd --create-home --uid 10001 lens && mkdir -p /data /plugins && chown lens /data /plugins
USER lens
ENV PULSAR_LENS_STORE=/data/store \
    PULSAR_LENS_PLUGIN_DIRS=/plugins \
    PULSAR_LENS_BIND_ADDRESS=0.0.0.0 \
    PULSAR_LENS_METRICS_ADDRESS=0.0.0.0 \
    PYTHONUNBUFFERED=1
VOLUME ["/data", "/plugins"]
EXPOSE 8501 9464
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).status == 200 else 1)"
CMD ["pulsar-lens", "serve", "--port", "8501"]
