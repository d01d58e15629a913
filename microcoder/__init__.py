"""microcoder: asynchronous actor-based RL for code LLMs (MicroCoder-GRPO) with a sandboxed judge.

The code lives in the top-level folders the product card fixes (actors/, learner/, buffer/,
sandbox/, launch/, data/, bench/); pyproject.toml installs each as `microcoder.<folder>`.
"""

__version__ = "0.1.0"
