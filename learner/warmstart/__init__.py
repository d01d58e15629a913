"""The supervised warm start of the tiny model: its settings (`[warmstart]`), the (prompt ->
solution) examples, SFT until the held-out pass rate enters its window, and the transformers
sampling it evaluates with. It may import learner/models/, learner/heldout.py and data/.
"""
