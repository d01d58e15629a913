"""`microcoder data build`: many problem files in, one clean training JSONL and a report out.

Stages, in order (each sees only what the one before kept; reason of a removal in brackets):

1. validate (`invalid`): every row of every source through its loader (any mix of formats; bad
   rows are collected, not fatal) and our schema; a problem needs a statement and a test.
2. verify references (`reference_fails`): problems that ship reference programs have them judged
   against their own tests in the sandbox (data/corpus/verify.py); kept when any reference passes.
   Problems without references are kept and counted.
3. exact duplicates (`duplicate`): the hash of the normalized statement (data/corpus/dedup.py).
4. near-duplicates (`near_duplicate`): MinHash LSH over word shingles (data/corpus/dedup.py).
5. decontamination (`contaminated`): statement n-gram overlap and identical test inputs with
   the `--eval-sets` (data/corpus/decontam.py).
6. date cutoff (`after_cutoff`): rows whose date may fall after `--cutoff-date` (data/formats/dates.py);
   rows without a date are kept and counted.

Ids must be unique in the output: when two sources use one id, the later one is renamed to
`<source>:<id>` and the report lists the renames. The report (data/corpus/build_report.py) is written
by `cli_main`; `build()` is the pure pipeline.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from microcoder.data.corpus.verify import verify_references
from microcoder.data.formats.dates import parse_cutoff, parse_date
from microcoder.data.formats.loaders import load_problems
from microcoder.data.problem import Problem, ProblemFormatError

STAGES = (
    "validate",
    "verify_references",
    "exact_duplicates",
    "near_duplicates",
    "decontamination",
    "date_cutoff",
)
REASONS = dict(
    zip(
        STAGES,
        (
            "invalid",
            "reference_fails",
            "duplicate",
            "near_duplicate",
            "contaminated",
            "after_cutoff",
        ),
        strict=True,
    )
)


@dataclass
class Removal:
    """One problem (or unreadable row) a stage removed."""

    id: str
    """The problem's id (after renaming), or `file:line` for a row that could not be loaded."""
    source: str
    """The problem's source (dataset name), or the file name for an unloadable row."""
    reason: str
    """One of REASONS' values."""
    match: str | None = None
    """Id of the kept problem it duplicates, or of the eval item it overlaps; None otherwise."""
    detail: str = ""
    """Why, in words (loader error, failing verdicts, similarity, the overlap, the date)."""


@dataclass
class StageCount:
    """Problems going into and out of one stage."""

    name: str
    """One of STAGES."""
    n_in: int
    """Problems the stage saw."""
    n_out: int
    """Problems it kept."""
    skipped: bool = False
    """True when the stage did not run (`--skip-verify`, no eval sets, no cutoff)."""
    by_source: dict[str, int] = field(default_factory=dict)
    """Problems kept, per source."""


@dataclass
class BuildOptions:
    """How `build` runs (the CLI's flags)."""

    eval_sets: list[str] = field(default_factory=list)
    """Problem files to decontaminate against (any loader format)."""
    cutoff_date: str | None = None
    """YYYY-MM-DD: rows dated after it are removed; None = no cutoff."""
    near_dup_threshold: float = 0.7
    """Estimated Jaccard similarity of word shingles at or above which two are near-duplicates."""
    verify: bool = True
    """Judge reference programs (False: `--skip-verify`, the stage is skipped)."""
    verify_max: int = 1
    """References judged per problem at most (the next only when the one before failed)."""
    workers: int = 0
    """Sandbox workers for verification; 0 = one per CPU core."""
    progress: bool = True
    """Progress lines on stderr."""


@dataclass
class BuildResult:
    """Everything the report needs."""

    kept: list[Problem]
    """The clean problems, in source order."""
    stages: list[StageCount]
    """One per STAGES entry, in order."""
    removed: list[Removal]
    """Every removal, in stage order."""
    before: list[Problem]
    """The problems that passed validation (the 'before' histograms)."""
    renamed: list[dict] = field(default_factory=list)
    """`{"from", "to", "file"}` per id renamed because another source used it first."""
    files: list[dict] = field(default_factory=list)
    """Per source file: `{"path", "format", "rows", "rejected"}`."""
    counts: dict = field(default_factory=dict)
    """Other figures: problems without references, unverified, undated, eval items, ..."""


def _say(options: BuildOptions, text: str) -> None:
    if options.progress:
        print(f"build: {text}", file=sys.stderr, flush=True)


def load_sources(
    paths: list[str],
) -> tuple[tuple[list[Problem], list[dict]], list[Removal], list[dict]]:
    """Load every file leniently: ((problems, renames), `invalid` removals, per-file counts).
    Files that one loader names alike (rllm's four files are all `rllm-deepcoder`) get their
    file stem added to the source (`rllm-deepcoder/train_code_leetcode`), so the report's
    per-source counts tell them apart.

    Raises FileNotFoundError / ProblemFormatError / OSError for a file that cannot be read at
    all (the CLI turns them into exit 2).
    """
    problems = []
    removed = []
    files = []
    loaded = [(path, load_problems(path, strict=False)) for path in paths]
    shared = Counter(r.problems[0].source for _, r in loaded if r.problems)
    for path, result in loaded:
        name = Path(path).name
        source = result.problems[0].source if result.problems else name
        if shared[source] > 1:  # one loader's name for several files: tell them apart
            source = f"{source}/{_stem(name)}"
            for p in result.problems:
                p.source = source
        for r in result.rejects:
            where = f"{name}:{r.line}" if r.line is not None else name
            removed.append(Removal(where, source, "invalid", None, f"{r.field}: {r.reason}"))
        for p in result.problems:
            if not p.prompt.strip():
                removed.append(Removal(p.id, p.source, "invalid", None, "prompt: empty statement"))
            else:
                problems.append((p, name))
        rows = len(result.problems) + len(result.rejects)
        counted = {"path": str(path), "format": result.format, "rows": rows}
        files.append({**counted, "rejected": len(result.rejects)})
    return _unique_ids(problems), removed, files


def _stem(name: str) -> str:
    """`train_code_leetcode` of `train_code_leetcode.json.gz`."""
    for ext in (".gz", ".jsonl", ".json"):
        name = name.removesuffix(ext)
    return name


def _unique_ids(tagged: list[tuple[Problem, str]]) -> tuple[list[Problem], list[dict]]:
    """Rename the later of two problems sharing an id to `<source>:<id>` (then `<file>:<id>`)."""
    seen: set[str] = set()
    out = []
    renamed = []
    for p, name in tagged:
        new = p.id
        for candidate in (p.id, f"{p.source}:{p.id}", f"{Path(name).stem}:{p.id}"):
            new = candidate
            if new not in seen:
                break
        k = 2
        while new in seen:
            new = f"{p.id}~{k}"
            k = k + 1
        if new != p.id:
            renamed.append({"from": p.id, "to": new, "file": name})
            p = replace(p, id=new)
        seen.add(new)
        out.append(p)
    return out, renamed


def _verify(problems, options, verifier, counts):
    counts["no_reference"] = sum(1 for p in problems if not p.solutions)
    checks = verifier(
        problems,
        max_per_problem=options.verify_max,
        config=_executor_config(options),
        progress=options.progress,
    )
    counts["references_checked"] = len(checks)
    counts["unverified"] = sum(1 for c in checks.values() if c.unverified)
    kept = []
    removed = []
    for p in problems:
        c = checks.get(p.id)
        if c is None or c.passed or c.unverified:
            kept.append(p)
        else:
            why = f"{'/'.join(c.verdicts)}: {c.message}".strip()[:300]
            removed.append(Removal(p.id, p.source, "reference_fails", None, why))
    return kept, removed


def _executor_config(options: BuildOptions):
    from microcoder.sandbox import ExecutorConfig  # data/ imports the sandbox inside functions only

    if options.workers:
        return ExecutorConfig(workers=options.workers)
    return None


def _dedup(problems, reason, find):
    matches = find([p.prompt for p in problems])
    gone = {m.removed: m for m in matches}
    removed = [
        Removal(p.id, p.source, reason, problems[gone[i].kept].id, f"score {gone[i].score:.3f}")
        for i, p in enumerate(problems)
        if i in gone
    ]
    return [p for i, p in enumerate(problems) if i not in gone], removed


def _decontaminate(problems, evals, counts):
    from microcoder.data.corpus.decontam import contaminated

    hits: dict[int, list] = {}
    for c in contaminated(problems, evals):
        hits.setdefault(c.index, []).append(c)
    counts["eval_items_matched"] = len({c.eval_id for cs in hits.values() for c in cs})
    removed = []
    for i, cs in sorted(hits.items()):
        p = problems[i]
        first = cs[0]
        detail = "; ".join(f"{c.why}: {c.detail}" for c in cs[:3])[:300]
        removed.append(Removal(p.id, p.source, "contaminated", first.eval_id, detail))
    return [p for i, p in enumerate(problems) if i not in hits], removed


def _cutoff(problems, cutoff, counts):
    kept = []
    removed = []
    counts["undated"] = counts["unreadable_date"] = 0
    for p in problems:
        period = parse_date(p.date)
        if period is None:
            counts["undated" if not p.date.strip() else "unreadable_date"] += 1
            kept.append(p)
        elif period.last > cutoff:
            removed.append(Removal(p.id, p.source, "after_cutoff", None, f"date {p.date}"))
        else:
            kept.append(p)
    return kept, removed


def _load_evals(paths: list[str], counts: dict) -> list[Problem]:
    evals = []
    for path in paths:
        result = load_problems(path, strict=False)
        evals.extend(result.problems)
        counts.setdefault("eval_rejected", 0)
        counts["eval_rejected"] += len(result.rejects)
    counts["eval_items"] = len(evals)
    return evals


def build(
    sources: list[str],
    options: BuildOptions | None = None,
    *,
    verifier: Callable[..., dict] = verify_references,
) -> BuildResult:
    """Run the stages on `sources` (see module doc); nothing is written.

    `verifier` is data/corpus/verify.py's verify_references (a unit test may pass a stand-in).
    Raises FileNotFoundError / ProblemFormatError / OSError for an unreadable file and
    ValueError for a bad cutoff date.
    """
    from microcoder.data.corpus.dedup import exact_duplicates, near_duplicates

    options = options or BuildOptions()
    cutoff = parse_cutoff(options.cutoff_date) if options.cutoff_date else None
    counts: dict = {}
    evals = _load_evals(options.eval_sets, counts) if options.eval_sets else []
    (problems, renamed), removed, files = load_sources(sources)
    before = list(problems)
    total_rows = sum(f["rows"] for f in files)
    stages = [_count("validate", total_rows, problems)]
    _say(options, f"validate: {total_rows} rows -> {len(problems)} ({len(removed)} invalid)")
    if renamed:
        _say(options, f"{len(renamed)} ids shared by two sources renamed <source>:<id>")
    threshold = options.near_dup_threshold
    runs = [
        ("verify_references", options.verify, lambda ps: _verify(ps, options, verifier, counts)),
        ("exact_duplicates", True, lambda ps: _dedup(ps, "duplicate", exact_duplicates)),
        (
            "near_duplicates",
            True,
            lambda ps: _dedup(
                ps,
                "near_duplicate",
                lambda st: near_duplicates(st, threshold, progress=options.progress),
            ),
        ),
        ("decontamination", bool(evals), lambda ps: _decontaminate(ps, evals, counts)),
        ("date_cutoff", cutoff is not None, lambda ps: _cutoff(ps, cutoff, counts)),
    ]
    for name, active, run in runs:
        n_in = len(problems)
        if not active:
            stages.append(_count(name, n_in, problems, skipped=True))
            _say(options, f"{name}: skipped")
            continue
        _say(options, f"{name}: {n_in} problems ...")
        problems, gone = run(problems)
        removed.extend(gone)
        stages.append(_count(name, n_in, problems))
        _say(options, f"{name}: {n_in} -> {len(problems)} ({len(gone)} {REASONS[name]})")
    return BuildResult(problems, stages, removed, before, renamed, files, counts)


def _count(name: str, n_in: int, kept: list[Problem], skipped: bool = False) -> StageCount:
    by_source = dict(sorted(Counter(p.source for p in kept).items()))
    return StageCount(name, n_in, len(kept), skipped, by_source)


def write_problems(problems: list[Problem], path: str | Path) -> None:
    """Our JSONL (Problem.to_json per line), readable back by load_problems."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for p in problems:
            f.write(p.to_json() + "\n")


def _fail(message: str) -> int:
    print(f"microcoder data build: {message}", file=sys.stderr)
    return 2


def cli_main(args: argparse.Namespace) -> int:
    """`microcoder data build ...` (flags in launch/cli/cmd_data.py); 0 ok, 2 bad input (a file
    that cannot be read, a bad flag, or no problem left after the stages)."""
    from microcoder.data.corpus.build_report import write_report

    options = BuildOptions(
        eval_sets=list(args.eval_sets or []),
        cutoff_date=args.cutoff_date,
        near_dup_threshold=args.near_dup_threshold,
        verify=not args.skip_verify,
        verify_max=args.verify_max,
        workers=args.workers,
    )
    if options.verify_max < 1:
        return _fail(f"--verify-max {options.verify_max}: judge at least 1 reference per problem")
    if not 0.0 < options.near_dup_threshold <= 1.0:
        return _fail(f"--near-dup-threshold {options.near_dup_threshold}: expected 0 < J <= 1")
    from microcoder.sandbox.bwrap import SandboxUnavailable

    try:
        result = build(list(args.sources), options)
    except (ProblemFormatError, OSError, ValueError) as e:
        return _fail(str(e))
    except SandboxUnavailable as e:
        return _fail(f"{e}\n(or skip reference verification: --skip-verify)")
    write_problems(result.kept, args.out)
    paths = write_report(result, args.report)
    print(
        f"microcoder data build: {len(result.kept)} problems -> {args.out}; "
        f"report: {', '.join(str(p) for p in paths)}",
        file=sys.stderr,
    )
    if not result.kept:  # written anyway (the report says why), but not a success
        reasons = Counter(r.reason for r in result.removed).most_common()
        first = next((r for r in result.removed), None)
        return _fail(
            "no problem survived the build ("
            + ", ".join(f"{n} {why}" for why, n in reasons)
            + (f"; first: {first.id}: {first.detail}" if first else "")
            + f"): see {Path(args.report) / 'report.md'}"
        )
    return 0
