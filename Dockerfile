# One image for the whole local cluster of docker-compose.yml: kafkalite brokers, the Apache
# ZooKeeper they keep their metadata in, and the Spark jobs of spark_jobs/ (pyspark, local
# mode by default). Java 17 runs ZooKeeper and Spark; Maven fetches their jars from Maven
# Central at build time (the project's own provisioning: kafkalite.cluster.zookeeper_server,
# spark_jobs.jars), so a container starts without network access.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONUNBUFFERED=1 \
    KAFKALITE_ZOOKEEPER_CACHE=/opt/zookeeper \
    SPARK_JOBS_JAR_CACHE=/opt/spark-jars
WORKDIR /app

# The broker (and its admin CLI) as a package; pyspark as pinned by pyproject.toml's extras.
COPY pyproject.toml README.md LICENSE ./
COPY kafkalite ./kafkalite
RUN pip install --no-cache-dir . "pyspark>=4.3,<4.4"

# ZooKeeper's jars, linked to a fixed path for the zookeeper service's command line.
RUN ln -s "$(python -c 'from kafkalite.cluster.zookeeper_server import zookeeper_lib; print(zookeeper_lib())')" /opt/zookeeper/lib

# The Spark jobs and their Kafka connector jars.
COPY spark_jobs ./spark_jobs
RUN python -m spark_jobs.jars && rm -rf /root/.m2

COPY config ./config
COPY docker ./docker

EXPOSE 9092 2181
CMD ["kafkalite", "serve", "--config", "config/server.properties"]
