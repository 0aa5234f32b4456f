# The throttle service: `docker build -t kafka-throttle-service .`
# Slim Python, the service's own dependencies only (no PySpark, no test or development tools;
# throttle-report is there and says how to add PySpark),
# a non-root user, and a health check on /healthz. The `demo` stage adds the development
# tools for `docker compose run --rm demo`; the default (last) stage is the service alone.
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY app ./app
COPY spark ./spark
# The versions CI ran (constraints.txt), not whatever is newest on the day the image is built.
RUN pip wheel --no-cache-dir --wheel-dir /wheels -c constraints.txt .

FROM python:3.11-slim-bookworm AS service
# The commit the image is built from, for kafka_throttle_build_info{revision}:
#   docker build --build-arg REVISION=$(git rev-parse --short=12 HEAD) .
ARG REVISION=unknown
RUN groupadd --system --gid 10001 throttle \
    && useradd --system --uid 10001 --gid throttle --home-dir /var/lib/kafka-throttle-service --no-create-home throttle \
    && install -d -o throttle -g throttle -m 0750 /var/lib/kafka-throttle-service
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels kafka-throttle-service && rm -rf /wheels
ENV THROTTLE_SERVICE_DATA_DIR=/var/lib/kafka-throttle-service \
    THROTTLE_SERVICE_HTTP_HOST=0.0.0.0 \
    THROTTLE_SERVICE_HTTP_PORT=8080 \
    PYTHONUNBUFFERED=1 \
    KAFKA_THROTTLE_REVISION=$REVISION
USER throttle:throttle
WORKDIR /var/lib/kafka-throttle-service
VOLUME ["/var/lib/kafka-throttle-service"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('THROTTLE_SERVICE_HTTP_PORT', '8080'), timeout=2)"]
ENTRYPOINT ["throttle-service"]

# The demo of the local stack: the service's packages plus devtools/ (throttle-demo).
FROM service AS demo
USER root
COPY devtools /src/devtools
COPY constraints.txt /src/constraints.txt
RUN pip install --no-cache-dir -c /src/constraints.txt /src/devtools && rm -rf /src
USER throttle:throttle
ENTRYPOINT ["throttle-demo"]

FROM service
