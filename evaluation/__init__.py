"""`microcoder eval`: LiveCodeBench-style pass@k through the training run's own actors.

    from microcoder.evaluation.engine import EvalSettings, evaluate
    report = evaluate(problems, EvalSettings(...), generators, executors, out_dir, renderer_text)

Pure parts: passk.py (unbiased pass@k), select.py (date / platform / difficulty filters),
budgets.py (one generation, several token budgets), samples.py (samples.jsonl), report.py and
report_md.py (report.json / report.md). The driver is engine.py (pipelined generate -> judge on
Ray actor handles); generations.py reads precomputed generations (`--generations FILE`).
The command body and its Ray bring-up read the root config, so they live in launch/
(launch/jobs/eval_command.py, launch/jobs/eval_cluster.py); nothing here imports launch/.
"""
