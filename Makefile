# Every target installs what it needs first (scripts/bootstrap.sh is idempotent).
.PHONY: setup serve test test-fast lint bench

setup:
	./scripts/bootstrap.sh

serve: setup
	.venv/bin/kafkalite serve --config config/server.properties

test: setup
	.venv/bin/python -m pytest -q

test-fast: setup
	.venv/bin/python -m pytest -q -m "not slow"

lint: setup
	.venv/bin/ruff check kafkalite tests protocol_tests bench

bench: setup
	.venv/bin/python -m bench.broker_bench
