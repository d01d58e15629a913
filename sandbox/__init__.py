"""Isolated code execution, output comparison (the judge) and the worker pool. No torch import."""
