"""A weight-sync receiver process for the tests, run as a script.

    python sync_receiver.py HOST PORT RANK WORLD OUT ROUNDS

Joins the group, receives ROUNDS rounds (0 = join and exit at once, a "dead" generator), and
writes the last round to OUT as safetensors with the version in the metadata.
"""

from __future__ import annotations

import sys

from safetensors.torch import save_file

from microcoder.learner.sync.transport import WeightReceiver


def main() -> None:
    host, port, rank, world, out, rounds = sys.argv[1:7]
    rx = WeightReceiver(
        host, int(port), int(rank), int(world), timeout_s=60, name=f"test-generator-{rank}"
    )
    tensors, version = {}, -1
    for _ in range(int(rounds)):
        version, tensors = rx.receive_all()
    if int(rounds):
        save_file(
            {k: v.contiguous() for k, v in tensors.items()}, out, metadata={"version": str(version)}
        )


if __name__ == "__main__":
    main()
