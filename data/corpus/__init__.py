"""`microcoder data build` and `data stats`: many problem files in, one clean training JSONL and a
report out (normalise, deduplicate, decontaminate, verify references, hold out). It may import
data/problem.py, data/formats/ and the sandbox; never launch/ or actors/.
"""
