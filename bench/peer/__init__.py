"""`microcoder bench peer`: our pass@1 vs LiveCodeBench's evaluator on the same generations.

On LeetCodeDataset, each problem gets sample 0 = its reference solution and samples 1.. = the
corrupted variants of bench/peer/variants.py (the infinite-loop one on a seeded --slow-fraction
of the problems only: it costs the full time limit on both judges). The generations file is
judged twice, one judge after the other, with the same per-test limit and worker count:
  ours: `microcoder eval --problems DATA --generations GEN --out OUT/ours` (a subprocess: the
        real CLI, its executor actor and sandbox);
  LCB:  LiveCodeBench's evaluate_generations in its own venv (bench/judge/lcb_run.py; the same
        conversion as `bench judge`).
bench/peer/compare.py then gives pass@1 both ways, the confusion table and the class of every
disagreement. Files stay in --out (generations.jsonl, ours/, lcb.json); `--reuse` recomputes
the comparison from them (that generations file) without judging again.

LeetCodeDataset's ListNode/TreeNode problems are `assert` problems here (data/
fmt_leetcodedataset.py). They go to LCB too: `to_lcb` (bench/judge/lcb_run.py) runs each assert
through a function `lcb_run_test(i)` (made a method of `Solution` when the code has that class,
since LCB then looks methods up on `Solution()`). Results list the kind of each row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

DESCRIPTION = "our judge vs LiveCodeBench's on LeetCodeDataset references + corrupted variants"
DATA = Path(__file__).resolve().parents[2].parent / (  # beside the repo root
    "shared/data/leetcodedataset/LeetCodeDataset-v0.3.1-test.jsonl.gz"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from microcoder.bench.peer.variants import VARIANTS

    p.add_argument("--data", default=str(DATA), help=f"LeetCodeDataset file (default {DATA})")
    p.add_argument("--limit", type=int, default=0, help="first N problems only (default all)")
    p.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated variant names (default all: " + ",".join(VARIANTS) + ")",
    )
    p.add_argument(
        "--slow-fraction",
        type=float,
        default=0.1,
        help="share of problems given the infinite-loop variant (default 0.1)",
    )
    p.add_argument("--seed", type=int, default=0, help="variant seed (default 0)")
    p.add_argument("--timeout", type=int, default=6, help="per-test limit in s, both (default 6)")
    p.add_argument("--memory-mb", type=int, default=2048, help="our memory limit (LCB: none)")
    p.add_argument("--workers", type=int, default=os.cpu_count(), help="workers for both")
    p.add_argument("--lcb-venv", default=".lcb-venv", help="LiveCodeBench's separate venv")
    p.add_argument("--out", default="", help="output folder (default runs/peer-<timestamp>)")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="compare the judged files already in --out instead of judging again",
    )
    p.add_argument("--examples", type=int, default=3, help="examples kept per class (default 3)")


def build_generations(problems, names: list[str], seed: int, slow_fraction: float) -> list[dict]:
    """Rows {problem_id, sample_index, code, variant}: the reference, then its variants."""
    from microcoder.bench.peer.variants import variants_for

    rows = []
    for p in problems:
        ref = p.meta.get("solution") or ""
        slow = zlib.crc32(f"{seed}/{p.id}/slow".encode()) % 10_000 < slow_fraction * 10_000
        wanted = [n for n in names if n != "infinite-loop" or slow]
        samples = [("reference", ref), *variants_for(ref, p.fn_name, p.id, wanted, seed)]
        for i, (variant, code) in enumerate(samples):
            rows.append({"problem_id": p.id, "sample_index": i, "code": code, "variant": variant})
    return rows


def ours_command(args, gen_path: Path, out: Path) -> list[str]:
    entry = "import sys; from microcoder.launch.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return [
        sys.executable,
        "-c",
        entry,
        "eval",
        "--problems",
        args.data,
        "--generations",
        str(gen_path),
        "--out",
        str(out),
        "--quiet",
        "--set",
        f"executor.time_limit_s={args.timeout}",
        "--set",
        f"executor.memory_mb={args.memory_mb}",
        "--set",
        f"executor.workers={args.workers}",
    ]


def run_ours(args, gen_path: Path, out: Path) -> tuple[dict, float]:
    """{(problem_id, sample_index): samples.jsonl record} and wall seconds of the CLI."""

    from microcoder.evaluation.samples import read_samples

    log = out.parent / "ours.log"
    t0 = time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.run(ours_command(args, gen_path, out), stdout=f, stderr=f).returncode
    wall = time.perf_counter() - t0
    if rc != 0:
        tail = log.read_text()[-800:]
        raise RuntimeError(f"`microcoder eval` failed (exit {rc}); its output is in {log}:\n{tail}")
    records, _ = read_samples(out / "samples.jsonl")
    return {(r.problem_id, r.sample_index): r for r in records}, wall


def run_lcb_side(args, problems, gens: list[dict]) -> tuple[list[bool], list[dict], float]:
    from microcoder.bench.judge.lcb_run import ensure_lcb_venv, run_lcb
    from microcoder.bench.judge.workloads import Item

    python = ensure_lcb_venv(Path(args.lcb_venv).resolve())
    by_id = {p.id: p for p in problems}
    items = []
    for g in gens:
        p = by_id[g["problem_id"]]
        items.append(Item(p, g["code"], f"{p.id}/{g['sample_index']}"))
    try:
        accepted, wall, meta = run_lcb(python, items, args.workers, args.timeout)
    except subprocess.CalledProcessError as err:
        raise RuntimeError(
            f"LiveCodeBench's evaluator exited {err.returncode}; rerun it by hand to see why: "
            f"{python} bench/judge/lcb.py IN.json OUT.json {args.workers} {args.timeout} "
            f"(delete {args.lcb_venv} to rebuild its venv)"
        ) from err
    return accepted, meta, wall


def join_rows(problems, gens: list[dict], ours: dict, lcb: list[bool], meta: list) -> list[dict]:
    """One row per sample with both judges' results (the input of compare.compare)."""
    kinds = {p.id: p.kind for p in problems}
    rows = []
    for g, ok, m in zip(gens, lcb, meta, strict=True):
        rec = ours.get((g["problem_id"], g["sample_index"]))
        if rec is None:
            raise RuntimeError(f"ours has no verdict for {g['problem_id']}/{g['sample_index']}")
        rows.append(
            {
                "problem_id": g["problem_id"],
                "sample_index": g["sample_index"],
                "variant": g["variant"],
                "kind": kinds[g["problem_id"]],
                "ours": rec.verdict,
                "ours_message": rec.message,
                "lcb": bool(ok),
                "lcb_meta": m if isinstance(m, dict) else {},
            }
        )
    return rows


def run(args: argparse.Namespace) -> dict:
    from microcoder.bench.peer.compare import compare
    from microcoder.bench.peer.variants import VARIANTS
    from microcoder.data.formats.loaders import load_problems

    if not Path(args.data).is_file():
        raise SystemExit(f"bench peer: no file {args.data}; pass --data PATH (LeetCodeDataset)")
    out = Path(args.out or f"runs/peer-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    problems = load_problems(args.data)
    problems = problems[: args.limit] if args.limit else problems
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"bench peer: unknown variant(s) {unknown}; choose from {VARIANTS}")
    gen_path = out / "generations.jsonl"
    lcb_path = out / "lcb.json"
    ours_dir = out / "ours"
    if args.reuse:
        if not lcb_path.is_file() or not (ours_dir / "samples.jsonl").is_file():
            raise SystemExit(f"bench peer --reuse: {out} lacks lcb.json or ours/samples.jsonl")
        from microcoder.evaluation.samples import read_samples

        gens = [json.loads(line) for line in gen_path.read_text().splitlines()]
        saved = json.loads(lcb_path.read_text())
        records, _ = read_samples(ours_dir / "samples.jsonl")
        ours = {(r.problem_id, r.sample_index): r for r in records}
        lcb = saved["accepted"]
        meta = saved["meta"]
        ours_s = saved["ours_s"]
        lcb_s = saved["lcb_s"]
    else:
        gens = build_generations(problems, names, args.seed, args.slow_fraction)
        gen_path.write_text("".join(json.dumps(g) + "\n" for g in gens))
        ours, ours_s = run_ours(args, gen_path, ours_dir)
        lcb, meta, lcb_s = run_lcb_side(args, problems, gens)
        lcb_path.write_text(
            json.dumps(
                {"accepted": lcb, "meta": meta, "ours_s": ours_s, "lcb_s": lcb_s}, default=str
            )
        )
    report = json.loads((ours_dir / "report.json").read_text())
    result = compare(join_rows(problems, gens, ours, lcb, meta), args.examples)
    result.update(
        ours_report_pass_at_1=report["pass_at_k"]["1"],
        ours_wall_s=ours_s,
        lcb_wall_s=lcb_s,
        timeout_s=args.timeout,
        workers=args.workers,
        memory_mb=args.memory_mb,
        seed=args.seed,
        variants=names,
        slow_fraction=args.slow_fraction,
        data=args.data,
        out=str(out),
        ours_command="microcoder " + " ".join(ours_command(args, gen_path, ours_dir)[3:]),
    )
    return result


def format_table(r: dict) -> str:
    c = r["confusion"]
    p = r["pass_at_1"]
    lines = [
        f"peer check: {r['problems']} problems, {r['samples']} samples (reference + variants), "
        f"per-test limit {r['timeout_s']} s, {r['workers']} workers; files in {r['out']}",
        f"pass@1: ours {100 * p['ours']:.2f}% (report.json {100 * r['ours_report_pass_at_1']:.2f}%)"
        f", LCB {100 * p['lcb']:.2f}%; wall ours {r['ours_wall_s']:.0f} s, LCB "
        f"{r['lcb_wall_s']:.0f} s",
        f"confusion: both pass {c['both_pass']} | both fail {c['both_fail']} | ours only "
        f"{c['ours_only']} | LCB only {c['lcb_only']}",
        "",
        "| variant | samples | ours AC | LCB AC | disagree |",
        "|---|---|---|---|---|",
    ]
    for v in r["by_variant"]:
        lines.append(
            f"| {v['variant']} | {v['samples']} | {v.get('ours_ac', 0)} | "
            f"{v.get('lcb_ac', 0)} | {v.get('disagree', 0)} |"
        )
    pairs = ", ".join(f"{k}: {v}" for k, v in r["verdict_pairs"].items())
    lines += [
        "",
        f"ours / LCB (error_code): {pairs}",
        f"disagreements: {r['disagreements']}",
        "| class | count | e.g. |",
        "|---|---|---|",
    ]
    for name, cls in r["classes"].items():
        ex = cls["examples"][0] if cls["examples"] else None
        shown = f"{ex['problem_id']}/{ex['sample_index']} ({ex['variant']})" if ex else ""
        lines.append(f"| {name} | {cls['count']} | {shown} |")
    for ex in r["classes"].get("unclassified", {}).get("examples", []):
        lines.append(f"  unclassified: {json.dumps(ex)}")
    return "\n".join(lines)
