"""Exact and near-duplicate statements: which problems to drop from a training corpus.

Exact: the hash of `normalize_statement` (case, whitespace, markup); the first occurrence is
kept.

Near: MinHash LSH (datasketch) over word shingles, each candidate verified with the exact
Jaccard of the two shingle sets, so every reported match really is at or above the threshold.
Items are taken in input order; one whose candidates include an earlier *kept* item at Jaccard
>= threshold is removed with the best such match, otherwise it is kept and indexed.

What is shingled, and why (the same problem from two sites must merge, distinct problems that
share a site's boilerplate must not):
1. Scaffolding is cut before shingling (normalize.content_text): headings ("Input Format",
   "Example 1:", "Constraints") and metadata lines ("Time limit: 2 seconds") are what two
   sites' copies differ in, and what every distinct problem of one site shares.
2. Variables are masked (normalize.content_words): a copy that renamed `nums` to `arr` or `n`
   to `N` changes every shingle the name is in; masked, it changes none.
3. A document-frequency filter computed on the corpus itself drops shingles that occur in
   more than `max_df` of the statements (and in more than `min_df_cap` of them, so a small
   corpus keeps everything): the boilerplate a fixed list cannot know ("the first line
   contains a single integer _v", "return it modulo 10 9 7"). A fixed list alone misses
   phrasing it never saw; rarity alone cannot act in a small corpus; so both.
A statement left with no shingles after the filter keeps its unfiltered set.

LSH banding is chosen for recall, not datasketch's balanced optimum: the largest rows-per-band
r (with bands b = num_perm // r) whose chance of making a pair at exactly the threshold a
candidate, 1 - (1 - t^r)^b, is at least `candidate_recall` (0.99). The extra candidates this
lets in below the threshold are removed by the exact verification, which is cheap (sorted
integer arrays).
"""

from __future__ import annotations

import itertools
import sys
import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from microcoder.data.corpus.normalize import content_words, normalize_statement

_MIX = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class Match:
    """One statement removed as a duplicate of an earlier kept one."""

    removed: int
    """Index (into the list given) of the statement removed."""
    kept: int
    """Index of the earlier, kept statement it duplicates."""
    score: float
    """1.0 for exact duplicates; the exact Jaccard of the shingle sets for near ones (the
    MinHash estimate when verification is off)."""


def exact_duplicates(statements: list[str]) -> list[Match]:
    """Statements whose normalized form equals an earlier one's; first occurrence kept.
    Empty statements are never duplicates."""
    first: dict[str, int] = {}
    out = []
    for i, text in enumerate(statements):
        key = normalize_statement(text)
        if not key:
            continue
        if key in first:
            out.append(Match(removed=i, kept=first[key], score=1.0))
        else:
            first[key] = i
    return out


def window_hashes(ids: np.ndarray, k: int) -> np.ndarray:
    """64-bit hash of the k-token window starting at each position (windows running past the
    end are hashed too; callers drop them)."""
    h = np.zeros(ids.size, dtype=np.uint64)
    padded = np.concatenate([ids, np.zeros(k, dtype=np.uint64)])
    with np.errstate(over="ignore"):
        for j in range(k):
            h = (h ^ padded[j : j + ids.size]) * _MIX
            h ^= h >> np.uint64(29)
    return h


def shingle_sets(
    statements: list[str], shingle: int = 5, *, max_df: float = 0.01, min_df_cap: int = 50
) -> list[np.ndarray]:
    """Each statement's set of word shingles (sorted unique uint64 hashes) after scaffolding
    cut, variable masking and the document-frequency filter (see the module docstring). A
    statement shorter than `shingle` words is one shingle of all its words."""
    if shingle < 1:
        raise ValueError(f"shingle = {shingle}: a shingle needs at least 1 word")
    vocab: defaultdict[str, int] = defaultdict(itertools.count(1).__next__)
    docs = [[vocab[w] for w in content_words(text)] for text in statements]
    lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
    ids = np.fromiter(itertools.chain.from_iterable(docs), dtype=np.uint64, count=lengths.sum())
    starts = np.concatenate([[0], np.cumsum(lengths)])
    sets = []
    for k in sorted({min(shingle, int(n)) for n in lengths if n}):
        hashes = window_hashes(ids, k)
        for i in np.flatnonzero(np.minimum(lengths, shingle) == k):
            sets.append((i, np.unique(hashes[starts[i] : starts[i + 1] - k + 1])))
    sets += [(i, np.zeros(0, dtype=np.uint64)) for i in np.flatnonzero(lengths == 0)]
    sets = [s for _, s in sorted(sets, key=lambda item: item[0])]
    return _drop_common(sets, max(min_df_cap, max_df * len(sets)))


def _drop_common(sets: list[np.ndarray], cap: float) -> list[np.ndarray]:
    """Remove shingles found in more than `cap` sets (a set left empty keeps all of its own)."""
    if not sets:
        return sets
    flat = np.concatenate(sets)
    values, counts = np.unique(flat, return_counts=True)
    common = values[counts > cap]
    if common.size == 0:
        return sets
    keep = ~np.isin(flat, common)
    bounds = np.cumsum([s.size for s in sets])[:-1]
    return [
        rest if rest.size else s
        for s, rest in zip(
            sets,
            np.split(flat[keep], np.searchsorted(np.flatnonzero(keep), bounds)),
            strict=True,
        )
    ]


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard of two sorted unique arrays (0.0 when both are empty)."""
    inter = np.intersect1d(a, b, assume_unique=True).size
    union = a.size + b.size - inter
    return inter / union if union else 0.0


def lsh_params(threshold: float, num_perm: int, candidate_recall: float = 0.99) -> tuple[int, int]:
    """(bands, rows): the largest rows r with P(candidate | J = threshold) >= candidate_recall."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold = {threshold}: a Jaccard threshold is in (0, 1]")
    best = (num_perm, 1)
    for r in range(1, num_perm + 1):
        b = num_perm // r
        if 1.0 - (1.0 - threshold**r) ** b >= candidate_recall:
            best = (b, r)
    return best


def _minhashes(sets: list[np.ndarray], num_perm: int, seed: int):
    from datasketch import MinHash

    fold = [((s ^ (s >> np.uint64(32))) & np.uint64(0xFFFFFFFF)).tolist() for s in sets]
    return MinHash.generator(fold, num_perm=num_perm, seed=seed, hashfunc=int)


def near_duplicates(
    statements: list[str],
    threshold: float = 0.7,
    *,
    num_perm: int = 128,
    shingle: int = 5,
    seed: int = 1,
    progress: bool = False,
    skip: set[int] | frozenset[int] = frozenset(),
    verify: bool = True,
    max_df: float = 0.01,
    min_df_cap: int = 50,
) -> list[Match]:
    """Statements within Jaccard >= threshold of an earlier kept one (MinHash LSH candidates,
    verified exactly unless verify=False). Indexes in `skip` (e.g. exact duplicates already
    removed) are neither matched nor indexed."""
    from datasketch import MinHashLSH

    t0 = time.perf_counter()
    sets = shingle_sets(statements, shingle, max_df=max_df, min_df_cap=min_df_cap)
    if progress:
        print(
            f"near-dup: {len(sets)} shingle sets in {time.perf_counter() - t0:.1f}s",
            file=sys.stderr,
        )
    lsh = MinHashLSH(num_perm=num_perm, params=lsh_params(threshold, num_perm))
    sketches: dict[int, object] = {}
    out = []
    for i, mh in enumerate(_minhashes(sets, num_perm, seed)):
        if progress and i and i % 20000 == 0:
            print(f"near-dup: {i}/{len(sets)} ({time.perf_counter() - t0:.1f}s)", file=sys.stderr)
        if i in skip or sets[i].size == 0:
            continue
        best = -1
        best_score = -1.0
        for j in lsh.query(mh):
            score = jaccard(sets[i], sets[j]) if verify else mh.jaccard(sketches[j])
            if score >= threshold and (score > best_score or (score == best_score and j < best)):
                best = j
                best_score = score
        if best >= 0:
            out.append(Match(removed=i, kept=best, score=float(best_score)))
            continue
        lsh.insert(i, mh, check_duplication=False)
        if not verify:
            sketches[i] = mh
    if progress:
        print(
            f"near-dup: {len(out)} removed of {len(sets)} in {time.perf_counter() - t0:.1f}s",
            file=sys.stderr,
        )
    return out
