"""train_worker.py with a record of where the training state lived: each rank writes
OUT/offload{rank}.json ({"moments_on_host", "params_on_host"}) whenever the Learner publishes
(after its steps, and inside a checkpoint save), so the 2-rank offload test can tell an
offloaded run from one that silently was not. Same arguments as train_worker.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import train_worker

from microcoder.learner.offload import params_offloaded
from microcoder.learner.trainer import Learner

publish = Learner.full_state_dict


def recording_publish(self: Learner, masters: bool = False) -> dict:
    host_resident = getattr(self.optimizer, "host_resident", None)
    placement = {
        "moments_on_host": bool(host_resident and host_resident()),
        "params_on_host": params_offloaded(self.model),
    }
    (Path(sys.argv[2]) / f"offload{self.rank}.json").write_text(json.dumps(placement))
    return publish(self, masters)


if __name__ == "__main__":
    Learner.full_state_dict = recording_publish
    train_worker.main()
