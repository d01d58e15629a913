"""From a problem to the model's input: the prompt templates (built-in and from a user's file), the
chat messages and token ids, and where the reasoning ends (`prompt.reasoning`). It may import
data/problem.py and data/formats/; never launch/ or actors/.
"""
