"""The two hot records on the wire, Group and GroupScores, in a columnar layout checked in one pass.

A Group travels as three frames:

    meta     msgpack map: the group's small fields plus one list per response field, each with
             one entry per response, in response order:
             {"group_id", "problem_id", "generator", "prompt_len", "prompt_bytes", "lengths",
              "text_bytes", "temperature", "policy_version", "truncated", "finish_reason",
              "gen_time_s", "last_policy_version"}
             ("last_policy_version" entries are int or nil; a map without the column, as older
             producers send, decodes with None for every response; an optional "source", the
             prompt's data source name, decodes as "" where absent)
    text     UTF-8, back to back: the prompt (prompt_bytes) | each response (text_bytes)
    tensors  raw little-endian bytes, back to back: prompt_ids int32[prompt_len] |
             response_ids int32[sum(lengths)] | logprobs float32[sum(lengths)]

GroupScores travels as one frame: a msgpack map {"group_id", "executor"} plus one list per
Score field ("reward", "verdict", "tests_passed", "tests_total", "detail", "extraction"; the
verdict is a short string per response, e.g. "AC" or "unfinished"; "extraction" entries are
strings, and a map without that column, as older executors send, decodes with "" for each;
"components" entries are maps {name: number}, a reward function's named components, sent only
when some response has one, and decode as {} where absent).

Why this layout: the server checks a group by parsing one small map (type checks per column,
not per record object) and comparing the other frames' sizes with what the map declares, then
stores the frames it received and forwards each consumer only the parts it reads: executors
get meta + text (they judge text), the learner meta + tensors (it trains on tokens), so every
byte crosses two sockets, as if the generator had sent it straight to its reader. Decoding
gives read-only zero-copy views of the tensor frame; text that is not valid UTF-8 decodes with
U+FFFD replacements (it is model output). Nothing here evaluates or unpickles input; every
problem is a MessageError naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import numpy as np

from microcoder.buffer.records import MessageError
from microcoder.buffer.wire import pack, unpack
from microcoder.protocol import Group, GroupScores, Response, Score

_MISSING = object()
_I4 = np.dtype("<i4")
_F4 = np.dtype("<f4")
_NUM = frozenset((int, float))
_INT = frozenset((int,))
_GROUP_FIELDS = {  # meta field: allowed value types
    "group_id": _INT,
    "problem_id": frozenset((str,)),
    "generator": frozenset((str,)),
    "prompt_len": _INT,
    "prompt_bytes": _INT,
}
_RESPONSE_COLUMNS = {  # per-response column: allowed element types
    "lengths": _INT,
    "text_bytes": _INT,
    "temperature": _NUM,
    "policy_version": frozenset((int,)),
    "truncated": frozenset((bool,)),
    "finish_reason": frozenset((str,)),
    "gen_time_s": _NUM,
}
_DERIVED = ("lengths", "text_bytes")
"""The response columns the codec computes (token and text sizes); the others are attributes."""
_OPTIONAL_COLUMNS = {  # per-response column that may be absent: allowed element types
    "last_policy_version": frozenset((int, type(None))),
}
_SCORES_FIELDS = {
    "group_id": frozenset((int,)),
    "executor": frozenset((str,)),
}
_SCORE_COLUMNS = {
    "reward": _NUM,
    "verdict": frozenset((str,)),
    "tests_passed": frozenset((int,)),
    "tests_total": frozenset((int,)),
    "detail": frozenset((str,)),
}
_OPTIONAL_SCORE_COLUMNS = {  # per-score column that may be absent
    "extraction": frozenset((str,)),
    "components": frozenset((dict,)),
}


@dataclass(slots=True)
class GroupInfo:
    """What the server needs of a checked group (the same attributes a Group has)."""

    group_id: int
    problem_id: str
    n_responses: int
    n_tokens: int
    min_policy_version: int
    source: str = ""


@dataclass(slots=True)
class ScoresInfo:
    """What the server needs of checked scores (the same attributes a GroupScores has)."""

    group_id: int
    n_scores: int
    verdicts: list[str] | None = None
    """The checked verdict column (by reference, not copied); online difficulty counts it
    (buffer/difficulty.py: scores_counts) only when it is on."""


# ---------------------------------------------------------------- checks


def _check(where: str, data: Any, fields: dict, columns: dict, optional: dict | None = None) -> int:
    """Check the plain fields and equal-length typed columns of `data` (`optional` columns only
    where present); returns the length."""
    if type(data) is not dict:
        raise MessageError(f"{where}: expected a map, got {type(data).__name__}")
    for name, types in fields.items():
        value = data.get(name, _MISSING)
        if type(value) not in types:
            if value is _MISSING:
                raise MessageError(f"{where}: missing field '{name}'")
            raise MessageError(f"{where}.{name}: wrong type {type(value).__name__}")
    size = -1
    for name, types in (columns | {k: v for k, v in (optional or {}).items() if k in data}).items():
        col = data.get(name)
        if type(col) is not list:
            raise MessageError(f"{where}.{name}: expected a list with one entry per response")
        if size < 0:
            size = len(col)
        elif len(col) != size:
            raise MessageError(f"{where}.{name}: {len(col)} entries, other columns have {size}")
        if not types.issuperset(map(type, col)):
            names = "/".join(sorted(t.__name__ for t in types))
            raise MessageError(f"{where}.{name}: entries must be {names}")
    return size


def check_group(meta: dict, text_bytes: int | None, tensor_bytes: int | None) -> GroupInfo:
    """Check a decoded group meta map and, where given, the sizes of its text and tensor frames
    -> GroupInfo."""
    n = _check("Group", meta, _GROUP_FIELDS, _RESPONSE_COLUMNS, _OPTIONAL_COLUMNS)
    lengths = meta["lengths"]
    prompt_len = meta["prompt_len"]
    chars = meta["text_bytes"]
    if min(prompt_len, meta["prompt_bytes"], *lengths, *chars) < 0:
        raise MessageError("Group: token and byte counts must be >= 0")
    tokens = sum(lengths)
    if tensor_bytes is not None and tensor_bytes != 4 * prompt_len + 8 * tokens:
        raise MessageError(
            f"Group: tensor frame of {tensor_bytes} bytes, but prompt_len {prompt_len} and "
            f"{tokens} response tokens need {4 * prompt_len + 8 * tokens}"
        )
    if text_bytes is not None and text_bytes != meta["prompt_bytes"] + sum(chars):
        raise MessageError(
            f"Group: text frame of {text_bytes} bytes, but prompt_bytes and text_bytes add up "
            f"to {meta['prompt_bytes'] + sum(chars)}"
        )
    versions = meta["policy_version"]
    source = meta.get("source", "")
    if type(source) is not str:
        raise MessageError(f"Group.source: wrong type {type(source).__name__}")
    return GroupInfo(
        meta["group_id"], meta["problem_id"], n, tokens, min(versions, default=0), source
    )


def check_scores(data: dict) -> ScoresInfo:
    """Check a decoded GroupScores map -> ScoresInfo."""
    n = _check("GroupScores", data, _SCORES_FIELDS, _SCORE_COLUMNS, _OPTIONAL_SCORE_COLUMNS)
    for c in data.get("components") or ():
        for k, v in c.items():
            if type(k) is not str or type(v) not in _NUM:
                raise MessageError("GroupScores.components: entries must map str to int/float")
    return ScoresInfo(data["group_id"], n, data["verdict"])


# ---------------------------------------------------------------- Group


def _columns(items: list, *tables) -> dict[str, list]:
    """A column per attribute named in `tables` (in their order): each item's value of it."""
    return {name: [getattr(x, name) for x in items] for table in tables for name in table}


def group_frames(group: Group) -> tuple[bytes, bytes, bytes]:
    """A Group as its (meta, text, tensors) frames; ValueError if a response's arrays disagree."""
    rs = group.responses
    lengths = [len(r.response_ids) for r in rs]
    for i, r in enumerate(rs):
        if len(r.logprobs) != lengths[i]:
            raise ValueError(
                f"group {group.group_id} response {i}: {lengths[i]} token ids but "
                f"{len(r.logprobs)} log-probs; report exactly one behaviour log-prob per "
                "generated token"
            )
    prompt_len = len(group.prompt_ids)
    # one copy of every array into its place; concatenate casts to the wire dtype (same_kind)
    ids = np.concatenate([group.prompt_ids, *(r.response_ids for r in rs)], dtype=_I4)
    lps = np.concatenate([r.logprobs for r in rs], dtype=_F4) if rs else np.zeros(0, _F4)
    texts = [group.prompt.encode(), *(r.text.encode() for r in rs)]
    meta = {
        "group_id": group.group_id,
        "problem_id": group.problem_id,
        "generator": group.generator,
        "source": group.source,
        "prompt_len": prompt_len,
        "prompt_bytes": len(texts[0]),
        "lengths": lengths,
        "text_bytes": [len(t) for t in texts[1:]],
        # the Response attributes the checks name, in their order
        **_columns(rs, [c for c in _RESPONSE_COLUMNS if c not in _DERIVED], _OPTIONAL_COLUMNS),
    }
    tensors = b"".join((ids.reshape(-1), lps.reshape(-1)))
    return pack(meta), b"".join(texts), tensors


def _nbytes(frame: Any) -> int | None:
    return None if frame is None else memoryview(frame).nbytes


def _split(sizes: list[int], start: int) -> list[tuple[int, int]]:
    """(start, end) of consecutive pieces of `sizes`, the first starting at `start`."""
    ends = list(accumulate(sizes, initial=start))
    return list(zip(ends[:-1], ends[1:], strict=True))


def read_group(meta: Any, text: Any = None, tensors: Any = None) -> Group:
    """A Group from its frames (checked). Without `text` (what the learner receives) its prompt
    and every response's text are None; without `tensors` (what executors receive) its
    prompt_ids and every response's response_ids and logprobs are None."""
    d = unpack(meta)
    check_group(d, _nbytes(text), _nbytes(tensors))
    lengths = d["lengths"]
    p = d["prompt_len"]
    n = len(d["lengths"])
    prompt = None
    texts = [None] * n
    prompt_ids = None
    ids = [None] * n
    lps = [None] * n
    if text is not None:
        raw = bytes(text)
        prompt = raw[: d["prompt_bytes"]].decode(errors="replace")
        texts = [
            raw[s:e].decode(errors="replace") for s, e in _split(d["text_bytes"], d["prompt_bytes"])
        ]
    if tensors is not None:
        tokens = sum(lengths)
        flat = np.frombuffer(tensors, "<i4", p + tokens)
        logprobs = np.frombuffer(tensors, "<f4", tokens, 4 * (p + tokens))
        prompt_ids = flat[:p]
        spans = _split(lengths, 0)
        ids = [flat[p + s : p + e] for s, e in spans]
        lps = [logprobs[s:e] for s, e in spans]
    last = d.get("last_policy_version") or [None] * n
    responses = [
        Response(i, lp, t, float(temp), v, trunc, fr, float(gt), lv)
        for i, lp, t, temp, v, trunc, fr, gt, lv in zip(
            ids,
            lps,
            texts,
            d["temperature"],
            d["policy_version"],
            d["truncated"],
            d["finish_reason"],
            d["gen_time_s"],
            last,
            strict=True,
        )
    ]
    return Group(
        d["group_id"],
        d["problem_id"],
        prompt,
        prompt_ids,
        responses,
        d["generator"],
        d.get("source", ""),
    )


# ---------------------------------------------------------------- GroupScores


def scores_frame(result: GroupScores) -> bytes:
    """A GroupScores as its one frame."""
    ss = result.scores
    return pack(
        {
            "group_id": result.group_id,
            "executor": result.executor,
            **_columns(ss, _SCORE_COLUMNS, ["extraction"]),
            **({"components": [s.components for s in ss]} if any(s.components for s in ss) else {}),
        }
    )


def read_scores(frame: Any) -> GroupScores:
    """A GroupScores from its frame (checked)."""
    d = unpack(frame)
    n = check_scores(d).n_scores
    scores = [
        Score(float(r), v, p, t, detail, x, dict(c))
        for r, v, p, t, detail, x, c in zip(
            d["reward"],
            d["verdict"],
            d["tests_passed"],
            d["tests_total"],
            d["detail"],
            d.get("extraction") or [""] * n,
            d.get("components") or [{}] * n,
            strict=True,
        )
    ]
    return GroupScores(d["group_id"], scores, d["executor"])
