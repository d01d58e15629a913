"""Test helpers shared by the engine tests of several folders (tests/actors, tests/gpu), outside
the product: `greedy` (a vLLM engine's and transformers' greedy tokens, to compare after a
weight sync). Importable as `engine_testing.*` because tests/conftest.py puts tests/support on
sys.path (pytest's importlib mode puts no test folder there)."""
