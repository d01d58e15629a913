"""Which models the learner trains, and proof that it computes them right: the supported families
and their checks, `microcoder model check`, the reference log-probs from transformers, the
memory plan from config.json, and the tiny local Qwen2. The checks run the trainer's own forward
(imported inside them); nothing here imports launch/ or actors/.
"""
