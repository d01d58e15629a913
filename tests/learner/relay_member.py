"""A relay receiver process for the tests, run as a script.

    python relay_member.py HOST PORT RANK WORLD DIE_AT OUT

Joins the relay group as RANK, receives one round and writes {"sums": {name: float sum},
"stats": its report} to OUT as JSON. DIE_AT >= 0: the process exits at once (os._exit, its
connections close as when it is killed) when chunk DIE_AT is due, after taking the ones before.
"""

from __future__ import annotations

import json
import os
import sys

from microcoder.learner.sync.relay import RelayReceiver


class Dies(RelayReceiver):
    die_at = -1

    def _wait_recv(self, work, n, what):
        if what == f"chunk {self.die_at}":
            os._exit(3)
        return super()._wait_recv(work, n, what)


def main() -> None:
    host, port, rank, world, die_at, out = sys.argv[1:7]
    Dies.die_at = int(die_at)
    rx = Dies(host, int(port), int(rank), int(world), timeout_s=5, name=f"gen-{rank}")
    sums = {name: float(t.double().sum()) for name, t in rx.receive()}
    with open(out, "w") as f:
        json.dump({"sums": sums, "stats": rx.stats}, f)


if __name__ == "__main__":
    main()
