"""Benchmarks of kafkalite (`make bench` / `python -m bench.broker_bench`)."""
