"""One rank of a two-rank gloo group for the stuck-peer tests, run as a script.

    python stuck_rank.py ROLE PORT TIMEOUT_S

ROLE `waiter` (rank 0) joins the group and runs one all-reduce inside `named_collective`,
printing the error it ends with on stdout; ROLE `stuck` (rank 1) joins, then sleeps and never
arrives at the all-reduce. Started alone, the waiter's peer never joins at all.
"""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

from microcoder.learner.distributed import init_distributed, named_collective, set_rank_env


def main() -> None:
    role, port, timeout_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    rank = 0 if role == "waiter" else 1
    set_rank_env(rank, 2, ("127.0.0.1", int(port)))  # as a learner rank actor does
    try:
        init_distributed(torch.device("cpu"), timeout_s)
        if role == "stuck":
            time.sleep(120)
            return
        with named_collective("train", timeout_s):
            dist.all_reduce(torch.ones(4))
    except RuntimeError as err:
        print(f"ERROR: {err}", flush=True)
        os._exit(3)
    print("OK", flush=True)


if __name__ == "__main__":
    main()
