"""`microcoder scale generators|executors N [--run DIR]`: resize a pool of a live run."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scale", help="resize the generator or executor pool of a live run")
    p.add_argument("pool", choices=["generators", "executors"], help="which pool")
    p.add_argument("n", type=int, help="number of replicas wanted (>= 1)")
    p.add_argument("--run", default=None, help="run directory (default: the newest under runs/)")
    p.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for the run to apply it"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from microcoder.launch.run.supervisor import send_request
    from microcoder.launch.run_dirs import newest_run

    if args.n < 1:
        print("scale: a pool needs at least 1 replica")
        return 2
    run_dir = args.run or newest_run("runs")
    if run_dir is None:
        raise SystemExit("no run directory under runs/; pass --run DIR")
    print(
        f"scale: asking the run in {run_dir} for {args.n} {args.pool} "
        "(its supervisor applies it without waiting for a learner step) ..."
    )
    result = send_request(
        run_dir, {"action": "scale", "pool": args.pool, "n": args.n}, args.timeout
    )
    if not result.get("ok"):
        print(f"scale: failed: {result.get('error')}")
        return 1
    print(
        f"scale: {args.pool}: {result['before']} -> {result['after']} "
        f"(added {result['added']}, removed {result['removed']})"
    )
    return 0
