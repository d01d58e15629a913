"""Benchmarks, each run as `microcoder bench NAME [--json]`."""
