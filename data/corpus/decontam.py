"""Decontamination: training problems that overlap an evaluation set.

Two kinds of evidence, each enough on its own:
- `ngram`: the training statement shares 13-word n-grams with an eval statement (the length
  GPT-3 and most decontamination since use: long enough that a shared one is rarely a
  coincidence, short enough that an edited copy still shares many). The words are
  normalize.content_words (scaffolding and prompt frames cut, variables masked, as in dedup),
  so a copy with renamed variables still matches. One shared n-gram is not enough on one site's
  problems: LeetCode repeats whole definitions ("a subsequence is an array that can be derived
  from another array by deleting some or no elements ...", "there is an undirected tree with _v
  nodes labeled from 0 to _v 1 ..."), 17-56 shared 13-grams between distinct problems, 11-42%
  of the smaller one's; real copies (the same statement, another constraint: "... I" and
  "... II") share 61-93%. So the shared n-grams must be at least `min_overlap` (0.5) of the
  smaller statement's. N-grams in more than `max_share` of the eval or the training items (and
  more than `min_common` of them) and n-grams more than half masked are ignored.
- `test_input`: training test inputs identical to an eval item's, compared in a canonical form
  that holds across formats: stdin inputs with whitespace collapsed; functional inputs one
  compact JSON value per argument; assert tests (`assert candidate(nums = [1, 2]) == 3`) the
  literal arguments of the asserted call in the same compact JSON. Small inputs recur across
  distinct problems ("[1,1,1,1]", "[[1,2,3],[4,5,6],[7,8,9]]", '"leetcode"': over 100 false
  hits between the rllm LeetCode sets and LeetCodeDataset when any shared input counted), so the inputs shared with one eval
  item must total `min_shared_chars` (48) canonical characters, each at least
  `min_input_chars` (8) long: no false hit left on those sets at 48 (4 at 32, 18 at 24), and
  69% of the rllm Codeforces and 85% of its CodeContests problems have that much input, so a
  copied contest problem is caught by its tests alone (and by its statement anyway).
One Contamination is reported per training problem (the n-gram one when there are both).
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from dataclasses import dataclass

import numpy as np

from microcoder.data.corpus.dedup import window_hashes
from microcoder.data.corpus.normalize import MASK, content_words
from microcoder.data.problem import Problem


@dataclass
class Contamination:
    """One training problem that overlaps an eval-set item."""

    index: int
    """Index into the training list."""
    eval_id: str
    """Id of the eval-set item it overlaps."""
    why: str
    """"ngram" (a shared n-gram of statements) or "test_input" (an identical test input)."""
    detail: str
    """The shared n-gram, or the shared input's first 60 characters."""


def _json(node: ast.expr) -> str:
    try:
        return json.dumps(ast.literal_eval(node), separators=(",", ":"), sort_keys=True)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return "".join(ast.unparse(node).split())


def _assert_inputs(code: str) -> list[str]:
    """The arguments of each asserted call (`assert f(a, b=2) == x`), canonical."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            call = node.test.left
            if isinstance(call, ast.Call) and (call.args or call.keywords):
                values = [*call.args, *(k.value for k in call.keywords)]
                out.append("\n".join(_json(v) for v in values))
    return out


def _line_json(line: str) -> str:
    try:
        return json.dumps(json.loads(line), separators=(",", ":"), sort_keys=True)
    except ValueError:
        return " ".join(line.split())


def canonical_inputs(problem: Problem) -> list[str]:
    """The problem's test inputs in the cross-format canonical form (module docstring)."""
    if problem.kind == "assert":
        return [key for t in problem.tests for key in _assert_inputs(t.get("code", ""))]
    if problem.kind == "functional":
        return ["\n".join(_line_json(x) for x in t["input"].splitlines()) for t in problem.tests]
    return [" ".join(t["input"].split()) for t in problem.tests]


def _common_cap(share: float, floor: int, count: int) -> float:
    return max(floor, share * count)


def _ngrams(tokens: list[str], n: int, vocab: dict[str, int]) -> np.ndarray:
    """Hashes of the n-grams at each start position; an n-gram more than half masked
    variables is hashed to 0 (not evidence: "_v _v _v ..." of a formula or a grid)."""
    if len(tokens) < n:
        return np.zeros(0, dtype=np.uint64)
    ids = np.asarray([vocab.setdefault(w, len(vocab) + 1) for w in tokens], dtype=np.uint64)
    hashes = window_hashes(ids, n)[: ids.size - n + 1]
    masked = np.concatenate([[0], np.cumsum([w == MASK for w in tokens])])
    hashes[(masked[n:] - masked[:-n]) * 2 > n] = 0
    return hashes


def _ngram_sets(problems: list[Problem], n: int, vocab: dict[str, int]) -> list[np.ndarray]:
    sets = [np.unique(_ngrams(content_words(p.prompt), n, vocab)) for p in problems]
    return [s[s != 0] for s in sets]


def _first_ngram(problem: Problem, n: int, vocab: dict[str, int], hits: np.ndarray) -> str:
    tokens = content_words(problem.prompt)
    pos = int(np.flatnonzero(np.isin(_ngrams(tokens, n, vocab), hits))[0])
    return " ".join(tokens[pos : pos + n])


def _ngram_matches(train, evals, n, max_share, min_common, min_overlap):
    vocab: dict[str, int] = {}
    eval_sets = _ngram_sets(evals, n, vocab)
    owners: dict[int, list[int]] = {}
    for e, s in enumerate(eval_sets):
        for h in s.tolist():
            owners.setdefault(h, []).append(e)
    eval_cap = _common_cap(max_share, min_common, len(evals))
    pool = np.asarray(sorted(h for h, o in owners.items() if len(o) <= eval_cap), dtype=np.uint64)
    train_sets = _ngram_sets(train, n, vocab)
    train_hits = [np.intersect1d(s, pool, assume_unique=True).tolist() for s in train_sets]
    train_df = Counter(h for hits in train_hits for h in hits)
    train_cap = _common_cap(max_share, min_common, len(train))
    out = {}
    for i, hits in enumerate(train_hits):
        shared = Counter(e for h in hits if train_df[h] <= train_cap for e in owners[h])
        best = [
            (count / min(train_sets[i].size, eval_sets[e].size), -e) for e, count in shared.items()
        ]
        if best and max(best)[0] >= min_overlap:
            e = -max(best)[1]
            mine = np.asarray([h for h in hits if e in owners[h]], dtype=np.uint64)
            detail = _first_ngram(train[i], n, vocab, mine)
            out[i] = Contamination(index=i, eval_id=evals[e].id, why="ngram", detail=detail)
    return out


def _input_matches(train, evals, min_input_chars, max_share, min_common, min_shared_chars):
    owners: dict[str, set[int]] = {}
    for e, p in enumerate(evals):
        for key in canonical_inputs(p):
            if len(key) >= min_input_chars:
                owners.setdefault(key, set()).add(e)
    eval_cap = _common_cap(max_share, min_common, len(evals))
    owners = {k: v for k, v in owners.items() if len(v) <= eval_cap}
    found = {}
    train_df: Counter = Counter()
    for i, p in enumerate(train):
        keys = sorted({k for k in canonical_inputs(p) if k in owners})
        train_df.update(keys)
        if keys:
            found[i] = keys
    train_cap = _common_cap(max_share, min_common, len(train))
    out = {}
    for i, keys in found.items():
        shared: Counter = Counter()
        for k in keys:
            if train_df[k] <= train_cap:
                shared.update({e: len(k) for e in owners[k]})
        best = max(((chars, -e) for e, chars in shared.items()), default=(0, 0))
        if best[0] >= min_shared_chars:
            e = -best[1]
            key = max((k for k in keys if e in owners[k]), key=len)
            detail = " ".join(key.split())[:60]
            out[i] = Contamination(index=i, eval_id=evals[e].id, why="test_input", detail=detail)
    return out


def contaminated(
    train: list[Problem],
    evals: list[Problem],
    *,
    n: int = 13,
    min_input_chars: int = 8,
    min_overlap: float = 0.5,
    min_shared_chars: int = 48,
    max_share: float = 0.01,
    min_common: int = 5,
) -> list[Contamination]:
    """Training problems overlapping an eval item (module docstring), in training order, one
    per problem: by `n`-word n-grams of statements (shared n-grams at least `min_overlap` of
    the smaller statement's), or by identical test inputs (shared with one eval item, together at
    least `min_shared_chars` canonical characters; inputs under `min_input_chars` never count).
    N-grams and inputs in more than `max_share` of either side (and more than `min_common`
    problems) are boilerplate, not evidence."""
    if n < 1:
        raise ValueError(f"n = {n}: an n-gram needs at least 1 word (13 is the usual choice)")
    if not train or not evals:
        return []
    by_ngram = _ngram_matches(train, evals, n, max_share, min_common, min_overlap)
    by_input = _input_matches(
        train, evals, min_input_chars, max_share, min_common, min_shared_chars
    )
    return [by_ngram.get(i) or by_input[i] for i in sorted(by_ngram.keys() | by_input.keys())]
