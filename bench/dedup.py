"""`microcoder bench dedup`: near-duplicate detection (data/corpus/dedup.py) on synthetic statements.

Statements come from a seeded generator: a Zipf-distributed vocabulary of made-up words, bodies
of 40-160 words wrapped in one of four site templates (Codeforces-style time/memory limits and
Input/Output Format, LeetCode-style examples and constraints, a note, a bare statement), and a
share of planted near-duplicates: a copy of a statement from at most 50 places earlier, in
another template, with a fraction of its body words replaced, at levels whose Jaccard falls on
both sides of the threshold (0 -> ~1.0, 2% -> ~0.8, 4% -> ~0.7, 6% -> ~0.6, 10% -> ~0.45).

Figures, in one run:
- `seconds_100k`: wall time of near_duplicates on the `--n` statements (goal <= 60 s).
- `recall` / `precision` on the first `--sample` statements, against the exact answer: every
  pair with exact Jaccard >= threshold of the same shingle sets (an inverted index of shingles
  enumerates every pair sharing one), then the same keep-first pass in input order. A statement
  is a positive when that exact pass removes it. Goals >= 0.95 each. `recall_unverified` /
  `precision_unverified`: the same with verify=False (accept on the MinHash estimate).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

DESCRIPTION = (
    "near-duplicate detection: wall time on 100k synthetic statements (goal <= 60 s), recall and "
    "precision vs exact all-pairs Jaccard on a 5k sample (goal >= 0.95 each)"
)
MUTATION_LEVELS = (0.0, 0.01, 0.02, 0.03, 0.035, 0.04, 0.045, 0.05, 0.06, 0.08, 0.1)
"""Fractions of body words a planted copy replaces."""
TEMPLATES = (
    "Time limit per test: 2 seconds\nMemory limit per test: 256 megabytes\n\n{body}\n\n"
    "Input Format\nThe first line contains a single integer n (1 <= n <= 2 * 10^5). The second "
    "line contains n integers a_1, a_2, ..., a_n (1 <= a_i <= 10^9).\n\nOutput Format\nPrint a "
    "single integer, the answer to the problem.\n",
    "{body}\n\nExample 1:\nInput: nums = [1,2,3,4]\nOutput: 10\nExplanation: see above.\n\n"
    "Constraints:\n1 <= nums.length <= 10^5\n-10^9 <= nums[i] <= 10^9\n",
    "## Problem\n{body}\n\n**Note:** the answer always fits in a signed 64-bit integer.\n",
    "{body}\n",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n", type=int, default=100_000, help="statements timed (100000)")
    p.add_argument("--sample", type=int, default=5000, help="statements checked exactly (5000)")
    p.add_argument("--threshold", type=float, default=0.7, help="Jaccard threshold (0.7)")
    p.add_argument("--num-perm", type=int, default=128, help="MinHash permutations (128)")
    p.add_argument("--shingle", type=int, default=5, help="words per shingle (5)")
    p.add_argument("--dup-share", type=float, default=0.1, help="planted copies' share (0.1)")
    p.add_argument("--seed", type=int, default=0)


def generate(n: int, seed: int = 0, dup_share: float = 0.1, vocab_size: int = 20_000):
    """(statements, planted): `planted` lists (copy, source, mutation level) triples."""
    import numpy as np

    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=int(k))) for k in rng.integers(3, 10, vocab_size)]
    weights = 1.0 / np.arange(1, vocab_size + 1) ** 0.9
    weights /= weights.sum()
    lengths = rng.integers(40, 161, n)
    flat = rng.choice(vocab_size, size=int(lengths.sum()), p=weights)
    bodies = np.split(flat, np.cumsum(lengths)[:-1])
    kinds = rng.integers(0, len(TEMPLATES), n)
    statements = []
    planted = []
    for i in range(n):
        body = bodies[i]
        if i > 0 and rng.random() < dup_share:
            src = int(rng.integers(max(0, i - 50), i))
            level = MUTATION_LEVELS[int(rng.integers(len(MUTATION_LEVELS)))]
            body = bodies[src].copy()
            swap = rng.random(body.size) < level
            body[swap] = rng.choice(vocab_size, size=int(swap.sum()), p=weights)
            bodies[i] = body
            planted.append((i, src, level))
        words = [vocab[w] for w in body.tolist()]
        text = " ".join(
            " ".join(words[k : k + 12]) + "." for k in range(0, len(words), 12)
        ).capitalize()
        statements.append(TEMPLATES[int(kinds[i])].format(body=text))
    return statements, planted


def exact_removed(sets, threshold: float) -> tuple[set[int], int]:
    """The keep-first pass with every pair's exact Jaccard: (removed indexes, pairs >= t)."""
    import numpy as np

    sizes = np.array([s.size for s in sets])
    flat = np.concatenate(sets)
    owner = np.repeat(np.arange(len(sets)), sizes)
    order = np.argsort(flat, kind="stable")
    flat = flat[order]
    owner = owner[order]
    cuts = np.flatnonzero(np.diff(flat)) + 1
    shared: dict[tuple[int, int], int] = {}
    for group in np.split(owner, cuts):
        if group.size > 1:
            docs = np.unique(group).tolist()
            for a in range(len(docs)):
                for b in range(a + 1, len(docs)):
                    key = (docs[a], docs[b])
                    shared[key] = shared.get(key, 0) + 1
    neighbours: dict[int, list[int]] = {}
    for (a, b), c in shared.items():
        if c / (sizes[a] + sizes[b] - c) >= threshold:
            neighbours.setdefault(b, []).append(a)
    removed: set[int] = set()
    for i in range(len(sets)):
        if any(j not in removed for j in neighbours.get(i, ())):
            removed.add(i)
    return removed, sum(len(v) for v in neighbours.values())


def _rates(found: set[int], truth: set[int]) -> tuple[float, float]:
    hit = len(found & truth)
    return (hit / len(truth) if truth else 1.0), (hit / len(found) if found else 1.0)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from microcoder.data.corpus.dedup import lsh_params, near_duplicates, shingle_sets

    t0 = time.perf_counter()
    statements, planted = generate(max(args.n, args.sample), args.seed, args.dup_share)
    print(
        f"bench dedup: generated {len(statements)} in {time.perf_counter() - t0:.1f}s",
        file=sys.stderr,
    )
    kw = dict(threshold=args.threshold, num_perm=args.num_perm, shingle=args.shingle)
    t0 = time.perf_counter()
    full = near_duplicates(statements[: args.n], progress=True, **kw)
    seconds = time.perf_counter() - t0
    sample = statements[: args.sample]
    t0 = time.perf_counter()
    truth, pairs = exact_removed(shingle_sets(sample, args.shingle), args.threshold)
    seconds_exact = time.perf_counter() - t0
    found = {m.removed for m in near_duplicates(sample, **kw)}
    unverified = {m.removed for m in near_duplicates(sample, verify=False, **kw)}
    recall, precision = _rates(found, truth)
    recall_u, precision_u = _rates(unverified, truth)
    in_sample = [(c, s, lvl) for c, s, lvl in planted if c < args.sample]
    bands, rows = lsh_params(args.threshold, args.num_perm)
    return {
        "n": args.n,
        "sample": args.sample,
        "threshold": args.threshold,
        "num_perm": args.num_perm,
        "shingle": args.shingle,
        "lsh_bands": bands,
        "lsh_rows": rows,
        "seconds_100k": round(seconds, 2),
        "removed_100k": len(full),
        "planted_100k": sum(1 for c, _, _ in planted if c < args.n),
        "recall": round(recall, 4),
        "precision": round(precision, 4),
        "recall_unverified": round(recall_u, 4),
        "precision_unverified": round(precision_u, 4),
        "sample_pairs_at_threshold": pairs,
        "sample_removed_exact": len(truth),
        "sample_removed_lsh": len(found),
        "seconds_exact_sample": round(seconds_exact, 2),
        "planted_sample": len(in_sample),
        "planted_exact_copies_found": sum(1 for c, _, lvl in in_sample if lvl == 0 and c in found),
        "planted_exact_copies": sum(1 for _, _, lvl in in_sample if lvl == 0),
    }


def format_table(r: dict) -> str:
    return "\n".join(
        [
            f"near-duplicates, threshold {r['threshold']}, {r['num_perm']} permutations "
            f"(LSH {r['lsh_bands']} bands x {r['lsh_rows']} rows), {r['shingle']}-word shingles",
            f"{'n':>8} {'seconds':>8} {'removed':>8} {'planted':>8}",
            f"{r['n']:>8} {r['seconds_100k']:>8.1f} {r['removed_100k']:>8} {r['planted_100k']:>8}"
            f"   (goal <= 60 s for 100k)",
            f"sample {r['sample']}: {r['sample_pairs_at_threshold']} pairs >= threshold, "
            f"{r['sample_removed_exact']} removed by the exact pass "
            f"({r['seconds_exact_sample']:.1f}s), {r['sample_removed_lsh']} by LSH",
            f"{'':<12} {'recall':>7} {'precision':>9}",
            f"{'verified':<12} {r['recall']:>7.4f} {r['precision']:>9.4f}   (goal >= 0.95 each)",
            f"{'estimate':<12} {r['recall_unverified']:>7.4f} {r['precision_unverified']:>9.4f}",
            f"planted exact copies found: {r['planted_exact_copies_found']}"
            f"/{r['planted_exact_copies']}",
        ]
    )
