"""The SFT loop: deterministic per seed, and the stop rule (unit tests with a fake evaluator)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from microcoder.data.config import PromptConfig
from microcoder.data.prompting.render import PromptRenderer
from microcoder.data.synthetic.tasks import generate_tasks
from microcoder.learner.warmstart.config import WarmStartConfig
from microcoder.learner.warmstart.examples import encode_example
from microcoder.learner.warmstart.sft import WarmStartError, train_sft


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Bit-reproducible and fast on a shared machine (competing OpenMP threads crawl)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def setup(small_model):
    tok = AutoTokenizer.from_pretrained(small_model)
    renderer = PromptRenderer(tok, PromptConfig(system={"stdin": "Solve it."}))
    examples = [encode_example(renderer, p) for p in generate_tasks(0, "train", 64)]
    return small_model, tok, examples


def cfg(**kw) -> WarmStartConfig:
    base = dict(batch_size=4, lr=1e-3, warmup_steps=2, eval_from=2, eval_every=2, max_steps=12)
    return WarmStartConfig(**{**base, **kw})


class FakeEvaluator:
    """Returns scripted pass rates by step and records the weights it saw (unit tests only)."""

    def __init__(self, rates: dict[int, float], default: float = 0.0):
        self.rates, self.default, self.seen = rates, default, {}

    def __call__(self, model, step: int) -> float:
        self.seen[step] = {k: v.clone() for k, v in model.state_dict().items()}
        return self.rates.get(step, self.default)


def run(setup, evaluator, seed: int = 0, **kw):
    path, tok, examples = setup
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path)
    out = train_sft(
        model, examples, cfg(**kw), evaluator, seed=seed, pad_id=tok.pad_token_id, progress=False
    )
    return model, out


def same_weights(model, weights) -> bool:
    return all(torch.equal(v, weights[k]) for k, v in model.state_dict().items())


def test_first_steps_are_identical_for_the_same_seed(setup):
    _, a = run(setup, FakeEvaluator({6: 0.3}))
    _, b = run(setup, FakeEvaluator({6: 0.3}))
    assert len(a.losses) == 6 and a.losses == b.losses


def test_another_seed_sees_other_batches(setup):
    _, a = run(setup, FakeEvaluator({4: 0.3}))
    _, b = run(setup, FakeEvaluator({4: 0.3}), seed=1)
    assert a.losses != b.losses


def test_stops_at_first_evaluation_inside_the_window_and_keeps_that_state(setup):
    ev = FakeEvaluator({2: 0.05, 4: 0.1, 6: 0.3, 8: 0.35})
    model, out = run(setup, ev)
    assert (out.step, out.pass_rate, out.steps_run) == (6, 0.3, 6)
    assert out.evals == [(2, 0.05), (4, 0.1), (6, 0.3)]
    assert same_weights(model, ev.seen[6])


def test_never_entering_the_window_fails_with_a_clear_message(setup):
    with pytest.raises(WarmStartError, match="never entered \\[0.2, 0.45\\] within max_steps=12"):
        run(setup, FakeEvaluator({}, default=0.1))


def test_overshoot_rolls_back_and_evaluates_every_step_from_the_last_low_point(setup):
    ev = FakeEvaluator({2: 0.0, 4: 0.1, 6: 0.9, 5: 0.3})
    model, out = run(setup, ev)
    assert out.evals == [(2, 0.0), (4, 0.1), (6, 0.9), (5, 0.3)]
    assert (out.step, out.steps_run) == (5, 7)
    assert same_weights(model, ev.seen[5])


def test_replayed_steps_after_a_rollback_repeat_the_same_trajectory(setup):
    rates = iter([0.0, 0.9, 0.1, 0.3])  # steps 2, 4 (overshoot), then 3 and 4 again
    _, out = run(setup, lambda model, step: next(rates))
    assert [s for s, _ in out.evals] == [2, 4, 3, 4]
    assert out.losses[4:6] == out.losses[2:4]


def test_overshoot_on_the_first_evaluation_fails_with_the_fix(setup):
    with pytest.raises(WarmStartError, match="jumped over the window.*lower eval_from"):
        run(setup, FakeEvaluator({2: 0.8}))


def test_overshoot_without_rollback_fails(setup):
    with pytest.raises(WarmStartError, match="jumped over"):
        run(setup, FakeEvaluator({2: 0.0, 4: 0.9}), rollback=False)


def test_window_must_be_ordered():
    with pytest.raises(ValueError, match="target_low"):
        WarmStartConfig(target_low=0.5, target_high=0.2)
