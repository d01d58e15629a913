"""Test helpers shared by the engine tests of several folders (tests/actors, tests/gpu,
tests/learner), outside the product: `greedy` (a vLLM engine's and transformers' greedy tokens,
to compare after a weight sync), `reload` (one weight round driven by hand on an engine),
`wave` (a generator that also samples one wave of leased prompts on request), `vllm_replies`
(held-out replies from a vllm.LLM, rendered like the generator's prompts), `stand_in` (an
engine on the weight path), `loop` (actors/generate_loop.py's loop over an engine whose groups are
futures), `tiny_engine` (an AsyncLLM over the tiny model on the CPU, as the engine tests start it). Importable as `engine_testing.*` because tests/conftest.py puts tests/support on
sys.path (pytest's importlib mode puts no test folder there)."""
