"""`microcoder bench dedup` at a small size: its figures, and that planted pairs are found."""

from __future__ import annotations

import argparse

from microcoder.bench import dedup as bench_dedup
from microcoder.data.corpus.dedup import jaccard, near_duplicates, shingle_sets


def _args(**over) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench_dedup.add_arguments(parser)
    return parser.parse_args([f"--{k.replace('_', '-')}={v}" for k, v in over.items()])


def test_the_bench_returns_its_figures_with_rates_in_0_1():
    result = bench_dedup.run(_args(n=1500, sample=600))
    for key in ("seconds_100k", "recall", "precision", "n", "sample", "threshold", "num_perm"):
        assert key in result
    assert (result["n"], result["sample"], result["threshold"]) == (1500, 600, 0.7)
    for key in ("recall", "precision", "recall_unverified", "precision_unverified"):
        assert 0.0 <= result[key] <= 1.0
    assert result["sample_removed_exact"] > 0
    assert "recall" in bench_dedup.format_table(result)


def test_planted_exact_copies_of_kept_statements_are_found_and_far_copies_are_kept():
    statements, planted = bench_dedup.generate(800, seed=3)
    sets = shingle_sets(statements)
    removed = {m.removed: m.kept for m in near_duplicates(statements)}
    exact = [(c, s) for c, s, level in planted if level == 0.0 and s not in removed]
    far = [(c, s) for c, s, level in planted if level == 0.1]
    assert exact and far
    assert all(removed.get(c) is not None for c, _ in exact)
    assert all(jaccard(sets[c], sets[s]) < 0.7 and removed.get(c) != s for c, s in far)


def test_the_exact_pass_removes_the_exact_copies_of_statements_it_keeps():
    statements, planted = bench_dedup.generate(300, seed=5)
    truth, pairs = bench_dedup.exact_removed(shingle_sets(statements), 0.7)
    copies = {c for c, s, level in planted if level == 0.0 and s not in truth}
    assert copies and copies <= truth and pairs >= len(truth)
