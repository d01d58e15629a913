"""MicroCoder-GRPO as pure functions and small controllers: advantages, the truncation masks, the
loss and its aggregations, the off-policy corrections and the mismatch metrics, the diversity
measure, the temperature controller and the presets. Only torch and the standard library; it
imports nothing else of learner/.
"""
