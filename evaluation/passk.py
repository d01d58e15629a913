"""The unbiased pass@k estimator of Chen et al. (2021), "Evaluating Large Language Models Trained
on Code", per problem and averaged over problems (what LiveCodeBench and evalplus report).

For one problem with n samples of which c pass:

    pass@k = 1 - C(n - c, k) / C(n, k)

computed as the product 1 - prod_{i = n-c+1}^{n} (1 - k / i), which never forms the (huge)
binomials and is exact to float precision. k > n is meaningless (there are not k samples to
draw) and raises with the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from n (c correct)
    is correct."""
    if not 0 <= c <= n:
        raise ValueError(f"pass@k: need 0 <= correct <= samples, got c={c}, n={n}")
    if k < 1:
        raise ValueError(f"pass@k: k must be >= 1, got {k}")
    if k > n:
        raise ValueError(
            f"pass@{k} needs at least {k} samples per problem but a problem has {n}; "
            f"raise --samples to {k} or more, or drop {k} from --k"
        )
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(counts: Iterable[tuple[int, int]], k: int) -> float | None:
    """pass@k averaged over problems, each given as (n samples, c correct); None if no problem."""
    values = [pass_at_k(n, c, k) for n, c in counts]
    return sum(values) / len(values) if values else None


def pass_at_ks(counts: Sequence[tuple[int, int]], ks: Sequence[int]) -> dict[str, float | None]:
    """{"1": x, "5": y, ...} over the problems `counts` (keys are strings, as in report.json)."""
    return {str(k): mean_pass_at_k(counts, k) for k in ks}


def usable_ks(ks: Sequence[int], samples: int) -> tuple[list[int], list[int]]:
    """Split requested k values into (usable, dropped) for `samples` samples per problem."""
    usable = sorted({k for k in ks if k <= samples})
    dropped = sorted({k for k in ks if k > samples})
    return usable, dropped
