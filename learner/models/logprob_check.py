"""The learner's own per-token log-probs of given sequences, and transformers' reference.

`learner_logprobs` runs sequences through the learner exactly as training does (a `Learner`
rank: FSDP2 shards, packed micro-batch, varlen attention, chunked head as configured);
`reference_logprobs` runs `from_pretrained` + `log_softmax(model(x).logits / T)` per sequence.
`microcoder model check` and tests/learner/test_families.py compare the two; `--dump-logprobs`
writes the first. For a sequence x, logprobs[i] = log p(x[i+1] | x[0..i]) at temperature T.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch
import torch.distributed as dist

from microcoder.learner.batch import build_batch, mask_generator
from microcoder.learner.models.config_overrides import model_config
from microcoder.learner.sample import SampleGroup, TrainSample


def seeded_sequences(vocab_size: int, seed: int = 0, lengths: tuple[int, ...] = (23, 17)):
    """Fixed random token sequences (a packed micro-batch of len(lengths) sequences)."""
    rng = random.Random(seed)
    return [[rng.randrange(vocab_size) for _ in range(n)] for n in lengths]


def learner_logprobs(learner, sequences: list[list[int]], temperature: float) -> list[list[float]]:
    """The learner's log-probs of every next token of each sequence, from ONE micro-batch (packed
    when learner.packing): the first token is the prompt, the rest the response. Under sequence
    parallelism (learner.sequence_parallel > 1) a collective: every rank returns the whole."""

    groups = [  # one group per sequence: a group's samples share its prompt
        SampleGroup(
            f"check{k}",
            [TrainSample(s[:1], s[1:], [0.0] * (len(s) - 1), temperature, 0.0, False, "", 0)],
        )
        for k, s in enumerate(sequences)
    ]
    batch = build_batch(groups, learner.algo, mask_generator(0, 0))
    micros = learner._micro_batches(batch)
    if len(micros) != 1:
        raise ValueError(
            f"the sequences need {len(micros)} micro-batches; raise learner.micro_batch_tokens "
            f"to at least {sum(map(len, sequences))}"
        )
    (mb,) = micros
    with torch.no_grad():
        logp = learner._logp(learner.model, mb)[0].double().cpu()
    index = mb.seq_index.cpu()
    where = mb.logit_index.cpu()
    if learner.sp.size > 1:  # every rank scored its slice's targets: gather them in row order
        index, where, logp = _gather_slices(
            index, where + learner.sp.rank * mb.input_ids.shape[1], logp
        )
    order = {tuple(t.tolist()): j for j, t in enumerate(batch.input_ids)}  # packing may reorder
    return [logp[index == order[tuple(s)]].tolist() for s in sequences]


def _gather_slices(
    index: torch.Tensor, where: torch.Tensor, logp: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # each [n], the row's n targets in order
    """Collective over the learner group: every rank's [n_r] targets (sequence index, position
    of the predicting logit in the whole row, log-prob) joined and sorted by position. Under
    sequence parallelism the ranks of an SP group hold disjoint slices of the row; those of
    other SP groups hold the same micro-batch again, so duplicates are dropped."""

    rows = [None] * dist.get_world_size()
    mine = [
        (int(w), int(i), float(p)) for w, i, p in zip(where, index, logp, strict=True) if i >= 0
    ]
    dist.all_gather_object(rows, mine)
    joined = sorted({r for part in rows for r in part})
    return (
        torch.tensor([r[1] for r in joined], dtype=torch.long),
        torch.tensor([r[0] for r in joined], dtype=torch.long),
        torch.tensor([r[2] for r in joined], dtype=torch.float64),
    )


def reference_logprobs(
    model_dir: str | Path,
    sequences: list[list[int]],
    temperature: float,
    config_overrides: dict | None = None,
) -> list[list[float]]:
    """transformers' own fp32 forward of each sequence alone: log_softmax(logits / T) at the next
    token (eager attention, so no kernel of this project is involved); the model config with
    `config_overrides` (learner/models/config_overrides.py)."""
    from transformers import AutoModelForCausalLM

    config = model_config(model_dir, config_overrides)
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, config=config, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    out = []
    with torch.no_grad():
        for s in sequences:
            ids = torch.tensor([s])
            logits = model(ids).logits[0, :-1].double() / temperature
            logp = torch.log_softmax(logits, dim=-1)
            out.append(logp.gather(-1, ids[0, 1:, None]).squeeze(-1).tolist())
    return out


def max_abs_diff(a: list[list[float]], b: list[list[float]]) -> float:
    """The largest |a - b| over every token of every sequence (lengths must agree)."""
    worst = 0.0
    for x, y in zip(a, b, strict=True):
        if len(x) != len(y):
            raise ValueError(f"sequence lengths differ: {len(x)} vs {len(y)}")
        worst = max([worst, *(abs(p - q) for p, q in zip(x, y, strict=True))])
    return worst
