"""Ray actors: thin wiring of the generator (vLLM), executor (judge pool) and learner group to the buffer."""
