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
             response_ids int32[sum(lengths)] | logprobs float32[sum(lengths)] |
             loss masks uint8[lengths[i]] of each response whose "masked" entry is true

Multi-turn trajectories (actors/environments/) add three optional meta columns, each sent only
when some response of the group has one, so a single-turn group's frames are byte for byte what
they were before them:
             "masked"      bool per response: its `loss_mask` follows the log-probs in the
                           tensor frame (false: None, every token the model's)
             "turns"       per response a list of maps, one per model turn: {"start", "end",
                           "feedback_tokens", "policy_version", "truncated", "passed" (bool or
                           nil), "metrics" {name: number}, "text_bytes", "feedback_bytes"}; the
                           turns' texts and feedbacks follow the responses' texts in the text
                           frame (response by response, turn by turn: text | feedback), so the
                           learner (meta + tensors) gets every turn's numbers without a byte of
                           text and executors and the rollouts dump get the texts too
             "env_reward"  number or nil per response: a user environment's reward

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
from microcoder.protocol import Group, GroupScores, Response, Score, Turn

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
_MULTI_TURN_COLUMNS = {  # per-response columns of multi-turn trajectories, sent only when used
    "masked": frozenset((bool,)),
    "turns": frozenset((list,)),
    "env_reward": frozenset((int, float, type(None))),
}
_TURN_FIELDS = {  # turn map field: allowed value types
    "start": _INT,
    "end": _INT,
    "feedback_tokens": _INT,
    "policy_version": _INT,
    "truncated": frozenset((bool,)),
    "passed": frozenset((bool, type(None))),
    "metrics": frozenset((dict,)),
    "text_bytes": _INT,
    "feedback_bytes": _INT,
}
_TURN_ATTRIBUTES = ("start", "end", "feedback_tokens", "policy_version", "truncated", "passed")
"""The Turn attributes that travel as they are (the others: metrics copied, texts sized)."""
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
    optional = _OPTIONAL_COLUMNS | _MULTI_TURN_COLUMNS
    n = _check("Group", meta, _GROUP_FIELDS, _RESPONSE_COLUMNS, optional)
    lengths = meta["lengths"]
    prompt_len = meta["prompt_len"]
    chars = meta["text_bytes"]
    if min(prompt_len, meta["prompt_bytes"], *lengths, *chars) < 0:
        raise MessageError("Group: token and byte counts must be >= 0")
    tokens = sum(lengths)
    mask_bytes = sum(
        k for k, m in zip(lengths, meta.get("masked") or [False] * n, strict=True) if m
    )
    need = 4 * prompt_len + 8 * tokens + mask_bytes
    if tensor_bytes is not None and tensor_bytes != need:
        raise MessageError(
            f"Group: tensor frame of {tensor_bytes} bytes, but prompt_len {prompt_len}, "
            f"{tokens} response tokens and {mask_bytes} loss-mask bytes need {need}"
        )
    turn_bytes = _check_turns(meta.get("turns"), lengths)
    if text_bytes is not None and text_bytes != meta["prompt_bytes"] + sum(chars) + turn_bytes:
        raise MessageError(
            f"Group: text frame of {text_bytes} bytes, but prompt_bytes, text_bytes and the "
            f"turns' bytes add up to {meta['prompt_bytes'] + sum(chars) + turn_bytes}"
        )
    versions = meta["policy_version"]
    source = meta.get("source", "")
    if type(source) is not str:
        raise MessageError(f"Group.source: wrong type {type(source).__name__}")
    return GroupInfo(
        meta["group_id"], meta["problem_id"], n, tokens, min(versions, default=0), source
    )


def _check_turns(column: list | None, lengths: list[int]) -> int:
    """Check the "turns" column (each response's list of turn maps, their token bounds inside
    the response) -> the text bytes the turns' texts and feedbacks take."""
    size = 0
    if column is None:
        return 0
    for i, (turns, length) in enumerate(zip(column, lengths, strict=True)):
        for k, turn in enumerate(turns):
            where = f"Group.turns[{i}][{k}]"
            if type(turn) is not dict:
                raise MessageError(f"{where}: expected a map, got {type(turn).__name__}")
            for name, types in _TURN_FIELDS.items():
                value = turn.get(name, _MISSING)
                if value is _MISSING:
                    raise MessageError(f"{where}: missing field '{name}'")
                if type(value) not in types:
                    raise MessageError(f"{where}.{name}: wrong type {type(value).__name__}")
            if not 0 <= turn["start"] <= turn["end"] <= length:
                raise MessageError(
                    f"{where}: tokens [{turn['start']}, {turn['end']}) are not inside the "
                    f"response's {length} tokens"
                )
            if min(turn["feedback_tokens"], turn["text_bytes"], turn["feedback_bytes"]) < 0:
                raise MessageError(f"{where}: token and byte counts must be >= 0")
            for k_, v in turn["metrics"].items():
                if type(k_) is not str or type(v) not in _NUM:
                    raise MessageError(f"{where}.metrics: entries must map str to int/float")
            size += turn["text_bytes"] + turn["feedback_bytes"]
    return size


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
        if r.loss_mask is not None and len(r.loss_mask) != lengths[i]:
            raise ValueError(
                f"group {group.group_id} response {i}: {lengths[i]} token ids but a loss mask "
                f"of {len(r.loss_mask)}; mark every response token (1 = the model's)"
            )
    prompt_len = len(group.prompt_ids)
    # one copy of every array into its place; concatenate casts to the wire dtype (same_kind)
    ids = np.concatenate([group.prompt_ids, *(r.response_ids for r in rs)], dtype=_I4)
    lps = np.concatenate([r.logprobs for r in rs], dtype=_F4) if rs else np.zeros(0, _F4)
    masks = [np.asarray(r.loss_mask, np.uint8) for r in rs if r.loss_mask is not None]
    texts = [group.prompt.encode(), *(r.text.encode() for r in rs)]
    turn_texts = [part.encode() for r in rs for t in r.turns for part in (t.text, t.feedback)]
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
        **_multi_turn_columns(rs),
    }
    tensors = b"".join((ids.reshape(-1), lps.reshape(-1), *masks))
    return pack(meta), b"".join(texts + turn_texts), tensors


def _multi_turn_columns(rs: list[Response]) -> dict[str, list]:
    """The multi-turn columns some response of `rs` uses (none for single-turn responses)."""
    out: dict[str, list] = {}
    if any(r.loss_mask is not None for r in rs):
        out["masked"] = [r.loss_mask is not None for r in rs]
    if any(r.turns for r in rs):
        out["turns"] = [
            [
                {
                    **{a: getattr(t, a) for a in _TURN_ATTRIBUTES},
                    "metrics": dict(t.metrics),
                    "text_bytes": len(t.text.encode()),
                    "feedback_bytes": len(t.feedback.encode()),
                }
                for t in r.turns
            ]
            for r in rs
        ]
    if any(r.env_reward is not None for r in rs):
        out["env_reward"] = [r.env_reward for r in rs]
    return out


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
    masks = [None] * n
    turn_texts: list[str] = []
    if text is not None:
        raw = bytes(text)
        prompt = raw[: d["prompt_bytes"]].decode(errors="replace")
        spans = _split(d["text_bytes"], d["prompt_bytes"])
        texts = [raw[s:e].decode(errors="replace") for s, e in spans]
        sizes = [
            b
            for turns in d.get("turns") or ()
            for t in turns
            for b in (t["text_bytes"], t["feedback_bytes"])
        ]
        start = spans[-1][1] if spans else d["prompt_bytes"]
        turn_texts = [raw[s:e].decode(errors="replace") for s, e in _split(sizes, start)]
    if tensors is not None:
        tokens = sum(lengths)
        flat = np.frombuffer(tensors, "<i4", p + tokens)
        logprobs = np.frombuffer(tensors, "<f4", tokens, 4 * (p + tokens))
        prompt_ids = flat[:p]
        spans = _split(lengths, 0)
        ids = [flat[p + s : p + e] for s, e in spans]
        lps = [logprobs[s:e] for s, e in spans]
        masks = _masks(tensors, d.get("masked"), lengths, 4 * p + 8 * tokens)
    last = d.get("last_policy_version") or [None] * n
    turns = _turns(d.get("turns"), n, turn_texts)
    env_rewards = d.get("env_reward") or [None] * n
    responses = [
        Response(
            i,
            lp,
            t,
            float(temp),
            v,
            trunc,
            fr,
            float(gt),
            lv,
            m,
            tu,
            None if er is None else float(er),
        )
        for i, lp, t, temp, v, trunc, fr, gt, lv, m, tu, er in zip(
            ids,
            lps,
            texts,
            d["temperature"],
            d["policy_version"],
            d["truncated"],
            d["finish_reason"],
            d["gen_time_s"],
            last,
            masks,
            turns,
            env_rewards,
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


def _masks(tensors: Any, masked: list[bool] | None, lengths: list[int], offset: int) -> list:
    """Each response's loss mask (a read-only uint8 view of the tensor frame from `offset`), or
    None where the response has none."""
    out: list = [None] * len(lengths)
    for i, (has, k) in enumerate(zip(masked or [False] * len(lengths), lengths, strict=True)):
        if has:
            out[i] = np.frombuffer(tensors, np.uint8, k, offset)
            offset += k
    return out


def _turns(column: list | None, n: int, texts: list[str]) -> list[list[Turn]]:
    """Each response's Turns from the checked "turns" column; `texts` the turns' texts and
    feedbacks in order (empty without the text frame: every text and feedback "")."""
    it = iter(texts)
    out = []
    for turns in column or [[]] * n:
        out.append(
            [
                Turn(
                    **{a: t[a] for a in _TURN_ATTRIBUTES},
                    text=next(it, ""),
                    feedback=next(it, ""),
                    metrics=dict(t["metrics"]),
                )
                for t in turns
            ]
        )
    return out


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
