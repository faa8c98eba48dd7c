# syntax=docker/dockerfile:1
# Pulsar Lens: the dashboard and its polling loop, beside a Pulsar cluster.
#   docker build -t pulsar-lens .                                      # every analysis: pyspark + JRE 17
#   docker build --build-arg WITH_SPARK=0 -t pulsar-lens:light .        # light analyses only, no Java
#   docker run -p 127.0.0.1:8501:8501 -p 127.0.0.1:9464:9464 -v lens-data:/data \
#     -e PULSAR_ADMIN_URL=http://broker:8080 pulsar-lens
# The dashboard has no login until one is configured (docs/access.md): publish it on loopback,
# as above, or configure the login before publishing it on other interfaces.
# BASE_IMAGE swaps the base for a mirror of python:3.11-slim (scripts/base-image.sh makes one).
# Installable plugins go in a derived image: FROM pulsar-lens + pip install <plugin>.
# Drop-in plugin files go in the /plugins volume.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
# The build and runtime requirements alone, so their layers are rebuilt only when they change
RUN python -c "import tomllib; t = tomllib.load(open('pyproject.toml', 'rb')); p = t['project']; \
open('build.txt', 'w').write('\n'.join(t['build-system']['requires']) + '\n'); \
deps = p['dependencies']; spark = [d for d in deps if d.startswith('pyspark')]; \
open('requirements.txt', 'w').write('\n'.join(d for d in deps if d not in spark) + '\n'); \
open('spark.txt', 'w').write('\n'.join(spark) + '\n')"
RUN --mount=type=cache,target=/root/.cache/pip python -m pip install -r build.txt
# the packages (.dockerignore lets only them through)
COPY . .
# SOURCE_DATE_EPOCH: the same sources make the same wheel, so the layers that copy it stay cached
RUN SOURCE_DATE_EPOCH=315532800 \
    python -m pip wheel --no-deps --no-build-isolation --no-cache-dir --wheel-dir /wheels .

FROM ${BASE_IMAGE}
# WITH_SPARK=0: the light variant, without pyspark and Java (the Spark analyses report that
# pyspark is missing; the history jobs are off)
ARG WITH_SPARK=1
# The user, the settings and the command first: they never change, so these small layers stay
# cached and every heavy layer below builds on them.
RUN useradd --create-home --uid 10001 lens && mkdir -p /data /plugins && chown lens /data /plugins
ENV PULSAR_LENS_STORE=/data/store \
    PULSAR_LENS_PLUGIN_DIRS=/plugins \
    PULSAR_LENS_BIND_ADDRESS=0.0.0.0 \
    PULSAR_LENS_METRICS_ADDRESS=0.0.0.0 \
    PULSAR_LENS_METRICS_PORT=9464 \
    PULSAR_LENS_SPARK_JOBS=${WITH_SPARK} \
    PYTHONUNBUFFERED=1
VOLUME ["/data", "/plugins"]
EXPOSE 8501 9464
# Healthy when the dashboard answers and the collect process's /health (on the metrics port)
# says polls end on time and the store takes them: a dashboard can be up while polling is dead.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s \
  CMD python -m pulsar_lens.cli.healthcheck --dashboard http://127.0.0.1:8501/_stcore/health
CMD ["pulsar-lens", "serve", "--port", "8501"]
# man1: the JRE's alternatives link its man page there, and slim images have no man pages
RUN if [ "$WITH_SPARK" = "1" ]; then \
      mkdir -p /usr/share/man/man1 \
      && apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
      && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    fi
COPY --from=build /src/requirements.txt /src/spark.txt /tmp/
RUN --mount=type=cache,target=/root/.cache/pip \
    spark=""; if [ "$WITH_SPARK" = "1" ]; then spark="-r /tmp/spark.txt"; fi; \
    python -m pip install -r /tmp/requirements.txt $spark && rm /tmp/requirements.txt /tmp/spark.txt
COPY --from=build /wheels /wheels
# every dependency is installed above: this resolves against them and downloads nothing
RUN nodeps=""; if [ "$WITH_SPARK" != "1" ]; then nodeps="--no-deps"; fi; \
    wheel=$(ls /wheels/pulsar_lens-*.whl) && \
    python -m pip install --no-cache-dir $nodeps "${wheel}" && rm -rf /wheels
USER lens
