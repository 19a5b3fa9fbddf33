"""Fault injection against kafkalite (and Apache Kafka, side by side): see chaos/README.md."""
