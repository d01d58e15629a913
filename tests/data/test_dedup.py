"""Exact and near-duplicate detection on small planted cases (data/corpus/normalize.py, data/corpus/dedup.py)."""

from __future__ import annotations

import random

from microcoder.data.corpus.dedup import (
    exact_duplicates,
    jaccard,
    lsh_params,
    near_duplicates,
    shingle_sets,
)
from microcoder.data.corpus.normalize import (
    MASK,
    content_text,
    content_words,
    normalize_statement,
    words,
)

ORIGINAL = """Time limit per test: 2 seconds
Memory limit per test: 256 megabytes

Little Polycarp has an array $a$ of $n$ integers. He wants to paint every element of the array
either red or blue so that the sum of the red elements is strictly greater than the sum of the
blue elements, while the number of red elements is strictly smaller than the number of blue
elements. Determine whether such a painting exists; elements of each colour need not be
contiguous and every element must be painted.

Input Format
The first line contains a single integer $n$ ($3 \\le n \\le 2 \\cdot 10^5$). The second line
contains $n$ integers $a_1, a_2, \\ldots, a_n$ ($0 \\le a_i \\le 10^9$).

Output Format
Print YES if Polycarp can paint the array as described, and NO otherwise.

Example 1:
Input: 5 2 8 6 3 1
Output: YES
"""

COPY = """Little Polycarp has an array arr of N integers. He wants to paint every element of the array
either red or blue so that the sum of the red elements is strictly greater than the sum of the
blue elements, while the number of red elements is strictly smaller than the number of blue
elements. Determine whether such a painting exists; elements of each colour need not be
contiguous and every element must be painted.

**Input**
The first line contains a single integer N (3 <= N <= 2 * 10^5). The second line
contains N integers arr[1], arr[2], ..., arr[N] (0 <= arr[i] <= 10^9).

**Output**
Print YES if Polycarp can paint the array as described, and NO otherwise.

Input: 5 2 8 6 3 1
Output: YES

Note: this problem was also used in the school olympiad.
"""

OTHER = """Time limit per test: 2 seconds
Memory limit per test: 256 megabytes

A frog sits on the first of $n$ stones placed along a river. From stone $i$ the frog may jump
to stone $i+1$ or $i+2$, paying the absolute difference of the two stones' heights in energy.
Find the minimum total energy the frog spends to reach the last stone, given every height.

Input Format
The first line contains a single integer $n$ ($3 \\le n \\le 2 \\cdot 10^5$). The second line
contains $n$ integers $a_1, a_2, \\ldots, a_n$ ($0 \\le a_i \\le 10^9$).

Output Format
Print the minimum total energy.

Example 1:
Input: 5 2 8 6 3 1
Output: 7
"""


def test_normalize_statement_removes_case_markup_and_extra_whitespace():
    text = "## Sum\n**Given**  an <b>array</b> `nums`, *return* $1 \\le n \\le 10^5$ &amp; [x](u)"
    assert normalize_statement(text) == "sum given an array nums, return 1 <= n <= 10^5 & x"


def test_normalize_statement_is_idempotent():
    once = normalize_statement(ORIGINAL + COPY)
    assert normalize_statement(once) == once


def test_words_are_letter_and_digit_runs_of_the_normalized_statement():
    assert words("Return *max_len* of A[i]!") == ["return", "max", "len", "of", "a", "i"]


def test_scaffolding_headings_and_metadata_lines_are_cut():
    content = content_text(ORIGINAL)
    assert "time limit" not in content and "memory limit" not in content
    assert "input format" not in content and "example 1" not in content
    assert "polycarp" in content


def test_renamed_variables_are_masked_alike():
    a = content_words("Given an array nums of length n, return nums[0] where 1 <= n.")
    b = content_words("Given an array arr of length m, return arr[0] where 1 <= m.")
    assert a == b and MASK in a


def test_exact_duplicate_differing_in_case_whitespace_and_markup_is_caught():
    base = "Given an array of integers, return the   largest sum of a contiguous subarray."
    variant = "## GIVEN an array of *integers*,\n\nreturn the largest sum of a <i>contiguous</i> subarray."
    matches = exact_duplicates([base, "Something else entirely.", variant])
    assert [(m.removed, m.kept, m.score) for m in matches] == [(2, 0, 1.0)]


def test_empty_statements_are_not_exact_duplicates_of_each_other():
    assert exact_duplicates(["", "  ", "x"]) == []


def test_near_duplicate_copied_from_another_site_is_caught():
    matches = near_duplicates([ORIGINAL, OTHER, COPY])
    assert [(m.removed, m.kept) for m in matches] == [(2, 0)]


def test_near_duplicate_score_is_the_exact_jaccard_of_the_shingle_sets():
    sets = shingle_sets([ORIGINAL, OTHER, COPY])
    (match,) = near_duplicates([ORIGINAL, OTHER, COPY])
    assert match.score == jaccard(sets[2], sets[0]) >= 0.7


def test_distinct_problem_with_the_same_scaffolding_is_kept():
    assert near_duplicates([ORIGINAL, OTHER]) == []


def _short_problem(rng: random.Random, boilerplate: str) -> str:
    story = " ".join(
        rng.choice(
            [
                "red",
                "blue",
                "tall",
                "stone",
                "frog",
                "river",
                "coin",
                "path",
                "tree",
                "edge",
                "sum",
                "max",
                "pair",
                "grid",
                "cell",
                "move",
            ]
        )
        for _ in range(12)
    )
    return f"{story}.\n{boilerplate}"


def test_boilerplate_common_in_the_corpus_is_dropped_so_short_distinct_problems_are_kept():
    io = (
        "The first line contains a single integer t, the number of test cases. Each test case "
        "consists of two lines: the first holds one integer n, the second holds n integers "
        "a_1 to a_n. It is guaranteed that the sum of n over all test cases does not exceed "
        "two hundred thousand. For each test case print one integer, the answer to the query."
    )
    rng = random.Random(0)
    corpus = [_short_problem(rng, io) for _ in range(80)]
    assert near_duplicates(corpus) == []
    assert near_duplicates(corpus, min_df_cap=10**6) != []  # without the filter they merge


def test_rerunning_on_the_kept_statements_removes_nothing():
    corpus = [ORIGINAL, OTHER, COPY, ORIGINAL.upper()]
    removed = {m.removed for m in exact_duplicates(corpus)}
    removed |= {m.removed for m in near_duplicates(corpus, skip=removed)}
    kept = [s for i, s in enumerate(corpus) if i not in removed]
    assert len(kept) == 2
    assert exact_duplicates(kept) == [] and near_duplicates(kept) == []


def test_skipped_indexes_are_neither_removed_nor_matched_against():
    matches = near_duplicates([ORIGINAL, COPY, COPY], skip={0})
    assert [(m.removed, m.kept) for m in matches] == [(2, 1)]


def test_statements_match_only_kept_ones_not_removed_ones():
    words_ = [f"w{i}" for i in range(200)]
    a = " ".join(words_)
    b = " ".join(words_[:150] + [f"x{i}" for i in range(50)])
    c = " ".join(words_[:190] + [f"y{i}" for i in range(10)])
    matches = near_duplicates([b, a, c], threshold=0.5)
    assert [(m.removed, m.kept) for m in matches] == [(1, 0), (2, 0)]


def test_lsh_params_make_a_pair_at_the_threshold_a_candidate_with_high_probability():
    bands, rows = lsh_params(0.7, 128)
    assert bands * rows <= 128
    assert 1 - (1 - 0.7**rows) ** bands >= 0.99


LEETCODE = """You are given an integer n and a 2D integer array queries. There are n cities numbered
from 0 to n - 1. Initially, there is a unidirectional road from city i to city i + 1 for all
0 <= i < n - 1. queries[i] = [ui, vi] represents the addition of a new unidirectional road from
city ui to city vi. After each query, you need to find the length of the shortest path from
city 0 to city n - 1. Return an array answer where answer[i] is the length of the shortest path
after processing the first i + 1 queries.

Example 1:
Input: n = 5, queries = [[2,4],[0,2],[0,4]]
Output: [3,2,1]
Explanation: After the addition of the road from 2 to 4, the length of the shortest path from
0 to 4 is 3. After the addition of the road from 0 to 2, the length of the shortest path from 0
to 4 is 2. After the addition of the road from 0 to 4, the length of the shortest path is 1.

Example 2:
Input: n = 4, queries = [[0,3],[0,2]]
Output: [1,1]

Constraints:
3 <= n <= 500
"""

LEETCODE_COPY_WITHOUT_EXAMPLES = """You are given an integer n and a 2D integer array queries.
There are n cities numbered from 0 to n - 1. Initially, there is a unidirectional road from city
i to city i + 1 for all 0 <= i < n - 1. queries[i] = [ui, vi] represents the addition of a new
unidirectional road from city ui to city vi. After each query, you need to find the length of
the shortest path from city 0 to city n - 1. Return an array answer where answer[i] is the length
of the shortest path after processing the first i + 1 queries.

Constraints:
3 <= n <= 500

class Solution:
    def shortestDistanceAfterQueries(self, n: int, queries: List[List[int]]) -> List[int]:
"""


def test_worked_examples_and_starter_code_are_not_part_of_the_content():
    text = content_text(LEETCODE) + " " + content_text(LEETCODE_COPY_WITHOUT_EXAMPLES)
    assert "[[2,4]" not in text and "explanation" not in text and "class solution" not in text
    assert "3 <= n <= 500" in content_text(LEETCODE)  # constraints, after the examples, stay


def test_copy_from_a_site_that_drops_the_examples_and_adds_starter_code_is_caught():
    matches = near_duplicates([LEETCODE, OTHER, LEETCODE_COPY_WITHOUT_EXAMPLES])
    assert [(m.removed, m.kept) for m in matches] == [(2, 0)]
