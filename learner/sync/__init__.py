"""Weights from learner rank 0 to the generators' vLLM workers: the stateless broadcast group and
its bucketed protocol, and collective waits with a deadline on every backend. Only torch is
imported here, so a vLLM worker extension can load it inside the vLLM worker process.
"""
