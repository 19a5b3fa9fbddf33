"""A protocol fuzzer: mutated requests of every served API against a real broker process."""
