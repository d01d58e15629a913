"""`microcoder judge --problems P --solutions S [--out V.jsonl] [--workers N] [--all-tests]`."""

from __future__ import annotations

import argparse
import json
import sys
import time

from microcoder.launch.cliargs import add_set_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "judge",
        help="judge solutions against problems in the sandbox; verdicts as JSONL + a summary",
        description="Judge every solution (JSONL: problem_id, code, optional id) against its "
        "problem (our JSONL or any loader format) in the bubblewrap sandbox pool.",
    )
    p.add_argument("--problems", required=True, help="problem file (JSONL/JSON, optionally .gz)")
    p.add_argument("--solutions", required=True, help="JSONL: {problem_id, code, id?} per line")
    p.add_argument("--out", help="write one verdict per line here (JSONL); default: stdout")
    p.add_argument("--workers", type=int, default=0, help="sandbox workers (default: CPU count)")
    p.add_argument("--all-tests", action="store_true", help="run every test (partial credit)")
    p.add_argument("--format", default="auto", help="problem file format (default: auto)")
    p.add_argument("--config", help="TOML config whose [executor] section is used")
    add_set_argument(p, "executor.isolation=none")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"microcoder judge: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from microcoder.data.problem import ProblemFormatError
    from microcoder.launch.config import load_config
    from microcoder.sandbox import JudgePool, SandboxUnavailable
    from microcoder.sandbox.inputs import load_problem_file, read_solutions
    from microcoder.sandbox.summary import Progress, summary_table

    try:
        problems = load_problem_file(args.problems, args.format)
        solutions = read_solutions(args.solutions, problems)
    except (ProblemFormatError, OSError, ValueError) as e:
        return _fail(str(e))
    cfg = load_config(args.config, args.overrides).executor
    updates = {"partial_credit": True} if args.all_tests else {}
    if args.workers:
        updates["workers"] = args.workers
    cfg = cfg.model_copy(update=updates)
    out = open(args.out, "w") if args.out else sys.stdout  # noqa: SIM115
    verdicts = []
    start = time.perf_counter()
    try:
        with JudgePool(cfg) as pool:
            for sol in solutions:
                pool.submit(problems[sol["problem_id"]], sol["code"], sol["id"])
            progress = Progress(len(solutions), enabled=not args.quiet and sys.stderr.isatty())
            for v in pool.as_completed():
                verdicts.append(v)
                out.write(json.dumps(v.to_dict(), ensure_ascii=False) + "\n")
                progress.update(v)
            progress.close()
    except SandboxUnavailable as e:
        return _fail(str(e))
    finally:
        if out is not sys.stdout:
            out.close()
    elapsed = time.perf_counter() - start
    print(summary_table(verdicts, elapsed, problems), file=sys.stderr)
    return 0
