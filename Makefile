# Every target installs what it needs first (scripts/bootstrap.sh is idempotent).
.PHONY: setup serve test test-extended test-fast lint docs bench compat bench-compare spark-test bench-spark fuzz chaos

setup:
	./scripts/bootstrap.sh

# Installs the runtime dependencies only; ARGS go to `kafkalite serve`, e.g.
# make serve ARGS="--override listeners=PLAINTEXT://127.0.0.1:19092"
ARGS ?=
serve:
	./scripts/bootstrap.sh runtime
	.venv/bin/kafkalite serve --config config/server.properties $(ARGS)

# The console's browser tests need Debian's chromium and chromium-driver, the view tests kcat
# (installed if missing).
test: setup
	./scripts/install_chromium.sh
	./scripts/install_kcat.sh
	.venv/bin/python -m pytest -q --durations=30

# Apache Kafka's side of the third-party suites and Spark jobs (about 5 minutes).
test-reference: setup
	.venv/bin/python -m pytest -q -m reference

# Long variants of suites the default run covers (Spark standalone cluster, spark-submit).
test-extended: setup
	.venv/bin/python -m pytest -q -m extended

test-fast: setup
	./scripts/install_chromium.sh
	./scripts/install_kcat.sh
	.venv/bin/python -m pytest -q -m "not slow"

LINTED = kafkalite tests protocol_tests bench compat spark_jobs fuzz chaos

# Style, formatting and types (mypy checks the packages pyproject.toml's [tool.mypy] lists).
lint: setup
	.venv/bin/ruff check $(LINTED)
	.venv/bin/ruff format --check $(LINTED)
	.venv/bin/mypy

# Protocol fuzzing against a fresh broker process (fuzz/): make fuzz FRAMES=1000000 SEED=7
FRAMES ?= 50000
SEED ?= 1
fuzz: setup
	.venv/bin/python -m fuzz --frames $(FRAMES) --seed $(SEED)

# The configuration reference, generated from the property tables.
docs: setup
	.venv/bin/python -m kafkalite.tools.config_reference > docs/configuration.md

bench: setup
	.venv/bin/python -m bench.broker_bench
	.venv/bin/python -m bench.cluster_bench --target kafkalite

# Differential suites: kafkalite and real Apache Kafka (provisioned from Maven Central).
compat: setup
	.venv/bin/python -m compat

# The broker benchmark against kafkalite and Apache Kafka, with ratios (bench/results/);
# then per security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) with the same certificates.
bench-compare: setup
	.venv/bin/python -m bench.compare
	.venv/bin/python -m bench.cluster_bench --target both
	.venv/bin/python -m bench.security_bench --target both

# Spark Structured Streaming jobs (spark_jobs/) against kafkalite and Apache Kafka.
spark-test: setup
	.venv/bin/python -m pytest -q tests/spark -m "reference or not reference"

bench-spark: setup
	.venv/bin/python -m bench.spark_microbatch

# Fault injection (chaos/README.md): a seeded run against kafkalite; results in data/chaos/.
# More options: make chaos CHAOS_ARGS="--duration 600 --seed 7 --target kafka --brokers 3".
CHAOS_ARGS ?= --duration 120 --seed 1
chaos: setup
	.venv/bin/python -m chaos $(CHAOS_ARGS)
