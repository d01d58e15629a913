"""Online difficulty: problems the policy always solves are retired, ones it never solves wait.

Each scored group's pass rate is recorded per problem id (a short bounded history, only for
problems that were scored: at 10^6 problems only the seen ones cost memory, a few dozen bytes
each). From that history, at hand-out time (`BufferState.get_prompts`):

- `retire_solved_after = K`: a problem whose last K groups were all correct is never handed out
  again in this run (counted in `retired`);
- `skip_unsolved_after = K`: a problem whose last K groups were all wrong is deferred: it sits
  out its source's next epoch and comes back in the epoch after (each skipped hand-out is counted
  in `deferred`). A source hands a problem out once per epoch, so "the rest of the epoch that
  marked it" would be empty; the deferral skips the next epoch in which the problem comes up
  after the mark (and any re-issue of it in the marking epoch: a prompt returned after a failed
  lease). Its history is kept, so one more all-wrong group after it comes back defers it again:
  a problem that stays unsolved is tried every other epoch.

Both 0 (the default): nothing is recorded or checked.

"Correct" is the verdict, not the reward: a response is correct when its verdict is "AC" (every
test passed, or the exact answer); SE (a sandbox fault, never the program's fault) is not
counted at all; every other verdict (WA, TLE, RE, CE, unfinished, ...) is wrong. A group's pass
rate = AC / (responses - SE); a group of SE only records nothing. With the default binary reward
an all-correct or all-wrong group is exactly what dynamic filtering drops (all rewards equal,
learner/intake.py signal_filter); with partial credit or shaped rewards an all-wrong group may
still carry a reward spread, and it still counts as all wrong here (nothing passed). Retiring
what is always solved and deferring what is never solved is how the run spends less generation
on groups the learner would discard.

The state is plain data in buffer snapshots (buffer/snapshot.py), so `--resume` keeps it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("microcoder.buffer")

CORRECT = "AC"
NOT_JUDGED = "SE"
"""The verdict that counts as correct, and the one that is not counted (sandbox/verdict.py)."""
_FULL = 255
"""Pass rates are stored as bytes 0..255 (0 and 1 exactly)."""


def verdict_counts(verdicts: Sequence[str]) -> tuple[int, int]:
    """(correct, judged) responses of a group from its verdicts (see the module docstring)."""
    return verdicts.count(CORRECT), len(verdicts) - verdicts.count(NOT_JUDGED)


def scores_counts(scores: Any) -> tuple[int, int]:
    """(correct, judged) of a scored group: a checked ScoresInfo carries its verdict column
    (buffer/codec.py), a GroupScores its Score records."""
    verdicts = getattr(scores, "verdicts", None)
    if verdicts is None:
        verdicts = [s.verdict for s in scores.scores]
    return verdict_counts(verdicts)


class DifficultyTracker:
    """Recent group pass rates per problem id, and the problems retired or deferred from them."""

    def __init__(
        self, retire_solved_after: int = 0, skip_unsolved_after: int = 0, history: int = 4
    ):
        if min(retire_solved_after, skip_unsolved_after, history) < 0:
            raise ValueError("retire_solved_after, skip_unsolved_after and history must be >= 0")
        self.retire_after = retire_solved_after
        self.skip_after = skip_unsolved_after
        self.history = max(history, retire_solved_after, skip_unsolved_after, 1)
        """Pass rates kept per problem (at least the longer of the two K)."""
        self.on = bool(retire_solved_after or skip_unsolved_after)
        """False: `record` does nothing and the buffer never calls `eligible`."""
        self.rates: dict[str, bytes] = {}
        """Problem id -> its last `history` group pass rates, oldest first, as bytes 0..255."""
        self.retired: dict[str, int] = {}
        """Retired problem id -> the epoch of the group that retired it."""
        self.deferred: dict[str, list[int]] = {}
        """Deferred problem id -> [epoch of the group that marked it, the epoch it sits out (-1
        until it comes up again)]."""
        self.deferred_handouts = 0
        """Hand-outs skipped because the problem was deferred."""

    # ------------------------------------------------------------ recording

    def record(self, problem_id: str, pass_rate: float, epoch: int) -> str:
        """One scored group of `problem_id` (handed out in `epoch`) passed at `pass_rate`;
        returns "retired" or "deferred" when this group retired or deferred the problem, else ""."""
        if not self.on or problem_id in self.retired:
            return ""
        q = min(_FULL, max(0, round(pass_rate * _FULL)))
        h = (self.rates.get(problem_id, b"") + bytes((q,)))[-self.history :]
        self.rates[problem_id] = h
        k = self.retire_after
        if k and len(h) >= k and h[-k:].count(_FULL) == k:
            self.retired[problem_id] = epoch
            self.deferred.pop(problem_id, None)
            del self.rates[problem_id]  # never handed out again: its history is not needed
            log.info(
                "problem %r retired: its last %d groups were all correct (epoch %d)",
                problem_id,
                k,
                epoch,
            )
            return "retired"
        k = self.skip_after
        if k and len(h) >= k and h[-k:].count(0) == k and problem_id not in self.deferred:
            self.deferred[problem_id] = [epoch, -1]
            return "deferred"
        return ""

    # ------------------------------------------------------------ hand-out

    def eligible(self, problem_id: str, epoch: int) -> bool:
        """May `problem_id` be handed out now, as an item of `epoch` (its source's epoch)? A
        deferred problem's skipped hand-outs are counted here."""
        if problem_id in self.retired:
            return False
        d = self.deferred.get(problem_id)
        if d is None:
            return True
        marked, out = d
        if out < 0 and epoch > marked:
            d[1] = out = epoch  # the first epoch it comes up in after the mark: it sits that out
        if epoch <= max(marked, out):
            self.deferred_handouts += 1
            return False
        del self.deferred[problem_id]  # sat out its epoch: back
        return True

    def pass_rates(self, problem_id: str) -> list[float]:
        """The problem's recorded pass rates, oldest first (quantized to 1/255)."""
        return [b / _FULL for b in self.rates.get(problem_id, b"")]

    def __len__(self) -> int:
        """Problems retired or deferred now (how many a hand-out scan may have to skip)."""
        return len(self.retired) + len(self.deferred)

    # ------------------------------------------------------------ views and snapshots

    def stats(self) -> dict[str, int]:
        return {
            "retired": len(self.retired),
            "deferred": self.deferred_handouts,
            "deferred_problems": len(self.deferred),
        }

    def state_dict(self) -> dict[str, Any]:
        return {
            "retire_solved_after": self.retire_after,
            "skip_unsolved_after": self.skip_after,
            "pass_rates": dict(self.rates),
            "retired": dict(self.retired),
            "deferred": {k: list(v) for k, v in self.deferred.items()},
            "deferred_handouts": self.deferred_handouts,
        }

    def load_state_dict(self, data: dict[str, Any]) -> None:
        """Restore from `state_dict` (missing keys: nothing recorded yet). The thresholds stay
        this run's (its config); a run resumed with retirement off hands retired problems out
        again, one resumed with deferral off forgets the deferrals."""
        self.rates = {
            str(k): bytes(v)[-self.history :] for k, v in (data.get("pass_rates") or {}).items()
        }
        retired = {str(k): int(v) for k, v in (data.get("retired") or {}).items()}
        self.retired = retired if self.retire_after else {}
        deferred = {str(k): [int(v[0]), int(v[1])] for k, v in (data.get("deferred") or {}).items()}
        self.deferred = deferred if self.skip_after else {}
        self.deferred_handouts = int(data.get("deferred_handouts", 0))
        if not self.on:
            self.rates = {}
