"""`microcoder data filter`: measure pass rates through the eval path, then calibrate and select
(data/difficulty/pipeline.py, pure). The measuring is here because it brings up Ray and the actors
(launch/jobs/eval_cluster.py) and drives microcoder.evaluation's engine, which data/ may not import.

Measure: the problems without a line in --rates (or a --measure-share sample of them with
--predict-rest) are evaluated in chunks of --chunk problems by `evaluation.engine.evaluate`
(the Generator/Executor actors and samples.jsonl of `microcoder eval`), into a work folder
beside the rates file (RATES.eval/, resumable); after each chunk its problems' pass rates are
appended to --rates. A rerun reuses both: finished problems are not sampled again, and a chunk
cut off midway resumes from its samples. Standard library only at the top (--help stays fast).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from microcoder.launch.cliargs import add_actor_counts, add_eval_config, add_format_argument


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `data filter` (launch/cli/cmd_data.py calls this)."""

    p.add_argument("--model", help="model folder (Hugging Face layout); needed to measure")
    p.add_argument("--problems", required=True, help="problem file (any loader format)")
    add_format_argument(p)
    p.add_argument("--samples", type=int, default=8, help="K samples per problem (default 8)")
    p.add_argument(
        "--keep", default="0.0-0.9", help="pass-rate band LOW-HIGH kept, inclusive (0.0-0.9)"
    )
    p.add_argument(
        "--max-unsolved-share",
        type=float,
        default=0.2,
        help="never-solved problems kept at most this share of the output (0.2)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of every draw (default 0)")
    p.add_argument("--out", default="data-filtered.jsonl", help="the selected problems (JSONL)")
    p.add_argument("--rates", default="data-rates.jsonl", help="measured pass rates (resumable)")
    p.add_argument("--report", default="data-filter-report", help="report folder")
    p.add_argument(
        "--predict-rest",
        action="store_true",
        help="measure a --measure-share sample, predict the others from their metadata",
    )
    p.add_argument(
        "--measure-share", type=float, default=0.2, help="share measured with --predict-rest"
    )
    smp = p.add_argument_group("sampling (the eval path's)")
    smp.add_argument("--temperature", type=float, default=1.0, help="default 1.0")
    smp.add_argument("--top-p", type=float, default=1.0, help="default 1.0")
    smp.add_argument("--max-tokens", type=int, default=4096, help="new tokens per sample (4096)")
    smp.add_argument("--max-prompt-tokens", type=int, default=4096, help="longer are skipped")
    smp.add_argument("--chunk", type=int, default=64, help="problems per rates append (64)")
    add_actor_counts(smp)
    smp.add_argument("--address", default="local", help="Ray: local (default), auto, HOST:PORT")
    add_eval_config(smp)


def log(msg: str) -> None:
    print(f"microcoder data filter: {msg}", file=sys.stderr, flush=True)


def cli_main(args: argparse.Namespace) -> int:
    from microcoder.data.problem import ProblemFormatError
    from microcoder.evaluation.settings import EvalError

    try:
        return _run(args)
    except (ValueError, ProblemFormatError, FileNotFoundError, EvalError) as err:
        print(f"microcoder data filter: {err}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from microcoder.data.difficulty.pipeline import filter_problems, write_outputs
    from microcoder.data.difficulty.rates import (
        check_identity,
        measure_sample,
        read_rates,
        to_measure,
    )
    from microcoder.data.difficulty.select import Rules, parse_band
    from microcoder.data.formats.loaders import load_problems

    keep = parse_band(args.keep)
    if args.samples < 1:
        raise ValueError(f"--samples {args.samples}: need at least 1")
    problems = load_problems(args.problems, format=args.format)
    if len({p.id for p in problems}) != len(problems):
        raise ValueError(f"{args.problems}: problem ids repeat; deduplicate (`data build`) first")
    identity = identity_of(args)
    rates = read_rates(args.rates)
    if args.model:
        check_identity(rates, identity, args.rates)
    pool = (
        measure_sample(problems, args.measure_share, args.seed) if args.predict_rest else problems
    )
    todo = to_measure(pool, rates, args.samples)
    log(
        f"{len(problems)} problems; {len(pool) - len(todo)} of the {len(pool)} to measure are in "
        f"{args.rates} already; {len(todo)} to measure"
    )
    if todo:
        if not args.model:
            raise ValueError(
                f"{len(todo)} problems have no rate in {args.rates}: pass --model DIR to "
                "measure them (or a --rates file that has them)"
            )
        from microcoder.launch.jobs.data_measure import measure

        measure(args, todo, identity)
        rates = read_rates(args.rates)
    rules = Rules(args.samples, keep, args.max_unsolved_share, args.seed)
    result = filter_problems(problems, rates, rules, predict_rest=args.predict_rest)
    report = write_outputs(result, args.out, args.report)
    print(_summary(report, args))
    return 0


def identity_of(args: argparse.Namespace) -> dict:
    """What makes a measured rate comparable: the model, the temperature and the budget."""
    return {
        "model": str(Path(args.model).resolve()) if args.model else None,
        "temperature": args.temperature,
        "max_tokens": args.max_tokens,
    }


def _summary(report: dict, args: argparse.Namespace) -> str:
    rows = "\n".join(
        f"  {b['band']:>14}  {b['before']:6d}  {b['after']:6d}" for b in report["bands"]
    )
    a = report["predictor_agreement"]
    agree = (
        "predictor: too few measured problems for a held-out check"
        if a is None
        else f"predictor (held-out {a['test']}): Spearman "
        f"{'n/a' if a['spearman'] is None else format(a['spearman'], '.3f')}, MAE {a['mae']:.3f} "
        f"(mean-only {a['baseline_mae']:.3f})"
    )
    removed = ", ".join(f"{k} {v}" for k, v in sorted(report["removed_by_reason"].items()))
    return (
        f"            band  before   after\n{rows}\n"
        f"kept {report['kept']} of {report['problems']} ({report['measured']} measured, "
        f"{report['predicted']} predicted); removed: {removed or 'none'}\n{agree}\n"
        f"out: {args.out}; report: {Path(args.report) / 'report.json'}; rates: {args.rates}"
    )


def work_dir(rates_path: str | Path) -> Path:
    """The eval work folder beside a rates file: RATES.eval/."""
    p = Path(rates_path)
    return p.with_name(p.name + ".eval")


def check_work_dir(folder: Path, identity: dict) -> None:
    """The work folder's samples must come from the same model / temperature / budget."""
    path = folder / "filter-identity.json"
    if path.exists() and json.loads(path.read_text()) != identity:
        raise ValueError(
            f"{folder} holds samples of other settings ({path.read_text().strip()}); delete it "
            "or use another --rates file"
        )
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(identity) + "\n")
