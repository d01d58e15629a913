"""`microcoder eval --model DIR --problems FILE [...]`: LiveCodeBench-style pass@k by platform and
difficulty at one or more token budgets, through the training run's Generator and Executor
actors (vLLM + the sandbox), pipelined; replies to `answer` problems are scored by the reward
function (`executor.reward`, as in training), not run. `--generations FILE` judges precomputed
samples without a model. The work is microcoder.evaluation (launch/jobs/eval_command.py drives it)."""

from __future__ import annotations

import argparse

from microcoder.launch.cliargs import add_actor_counts, add_eval_config, add_format_argument

EPILOG = """\
defaults follow LiveCodeBench's pass@1 setting: --samples 10 at --temperature 0.2, --top-p 0.95.
Each sample is generated once at the largest --max-tokens budget and cut to the smaller ones.
With --max-turns N each sample is a trajectory (one line per sample and turn in samples.jsonl).
Outputs in --out: report.json, report.md, samples.jsonl (one line per sample and budget),
settings.json and logs/. Interrupted? Rerun the same command with --resume --out DIR.

examples:
  microcoder eval --model Qwen/Qwen2.5-Coder-7B-Instruct-dir --problems lcb.jsonl \\
      --from 2024-08-01 --to 2025-02-01 --max-tokens 4096,8192
  microcoder eval --problems LeetCodeDataset-test.jsonl.gz --generations gens.jsonl
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="pass@k of a model on a problem file (LiveCodeBench style), by platform/difficulty",
        description="LiveCodeBench-style pass@k by platform and difficulty at one or more token "
        "budgets, through the training run's Generator and Executor actors (vLLM + sandbox), "
        "pipelined; replies to `answer` problems are scored by the reward function "
        "(executor.reward, as in training). --generations judges precomputed samples without a "
        "model.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _source_arguments(p.add_argument_group("what to evaluate"))
    _selection_arguments(p.add_argument_group("which problems"))
    _sampling_arguments(p.add_argument_group("sampling"))
    _where_arguments(p.add_argument_group("where"))
    _output_arguments(p.add_argument_group("output"))
    add_eval_config(p)
    p.set_defaults(func=run)


def _source_arguments(src) -> None:
    src.add_argument("--model", help="Hugging Face model folder (needed unless --generations)")
    src.add_argument("--problems", required=True, help="problem file (any loader format, .gz ok)")
    add_format_argument(src)
    src.add_argument(
        "--generations",
        metavar="FILE",
        help="judge these samples instead of generating: JSONL {problem_id, "
        "sample_index, text|code}, or LiveCodeBench's code_list output",
    )


def _selection_arguments(sel) -> None:
    sel.add_argument(
        "--from",
        dest="date_from",
        metavar="DATE",
        help="first problem date, YYYY-MM-DD (inclusive)",
    )
    sel.add_argument(
        "--to", dest="date_to", metavar="DATE", help="last problem date, YYYY-MM-DD (inclusive)"
    )
    sel.add_argument("--platform", help="comma-separated platforms, e.g. leetcode,atcoder")
    sel.add_argument("--difficulty", help="comma-separated difficulties, e.g. easy,medium")


def _sampling_arguments(smp) -> None:
    smp.add_argument("--samples", type=int, default=10, help="samples per problem, n (default 10)")
    smp.add_argument("--k", default="1", help="pass@k values, comma-separated (default 1)")
    smp.add_argument(
        "--max-tokens",
        default="4096,8192",
        help="test budgets in new tokens, comma-separated (default 4096,8192)",
    )
    smp.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=None,
        help="prompts longer than this are skipped and listed (default 4096)",
    )
    smp.add_argument(
        "--max-turns",
        type=int,
        default=1,
        help="turns per sample (default 1): with N > 1 each sample is a trajectory of the "
        "config's multi-turn environment (environment.kind; `repair` when it is `single`: a "
        "failing program gets the visible tests' feedback and the model answers again), each "
        "turn capped at the largest --max-tokens; reports pass@k after each turn next to the "
        "single-turn figure (turn 1)",
    )
    smp.add_argument("--temperature", type=float, default=0.2, help="default 0.2 (0 = greedy)")
    smp.add_argument("--top-p", type=float, default=0.95, help="default 0.95")


def _where_arguments(run_g) -> None:
    add_actor_counts(run_g)
    run_g.add_argument(
        "--address",
        default=None,
        help="Ray cluster: local (default: a private one), auto or HOST:PORT",
    )
    run_g.add_argument(
        "--sequences-per-call",
        type=int,
        default=128,
        help="sequences (prompts x samples) per generator call; raise it on big "
        "GPUs for fuller engine batches (default 128)",
    )
    run_g.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="seconds one generator/executor call may take (default 3600)",
    )


def _output_arguments(out) -> None:
    out.add_argument("--out", help="output folder (default runs/eval-<timestamp>)")
    out.add_argument(
        "--resume",
        action="store_true",
        help="continue in --out from its samples.jsonl (nothing is judged twice)",
    )
    out.add_argument("--quiet", action="store_true", help="no progress line")


def run(args: argparse.Namespace) -> int:
    from microcoder.launch.jobs.eval_command import run_eval

    return run_eval(args)
