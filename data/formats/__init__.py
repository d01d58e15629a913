"""Reading problem files: the public formats (APPS/TACO, HumanEval, LiveCodeBench, LeetCodeDataset,
rllm), raw rows, safe decoding of LiveCodeBench's pickled tests, LeetCode literals and prelude,
and `load_problems`. It imports only data/problem.py and the standard library (and never
launch/, actors/).
"""
