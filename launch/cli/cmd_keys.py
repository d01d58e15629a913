"""`microcoder keys RUN_DIR [--force]`: create the CurveZMQ keys of a run ahead of its launch.

Writes RUN_DIR/keys/server.key{,_secret} and RUN_DIR/keys/clients/client.key{,_secret} (0600, in
0700 folders). `microcoder launch` makes them itself at bring-up when they are missing (buffer.curve
is on by default); this command is for placing them first, e.g. on a path every node shares
(buffer.keys_dir), or for replacing them (--force) between runs. The buffer server admits only
clients holding the client key, and traffic is encrypted, so other users of a shared cluster
cannot read or inject groups.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("keys", help="create CurveZMQ keys for the buffer in a run directory")
    p.add_argument("run_dir", help="run directory; keys go to RUN_DIR/keys")
    p.add_argument("--force", action="store_true", help="replace keys that already exist")
    p.set_defaults(func=run_keys)


def run_keys(args: argparse.Namespace) -> int:
    from microcoder.buffer.keys import generate_keys, keys_dir_of

    try:
        where = generate_keys(keys_dir_of(args.run_dir), force=args.force)
    except FileExistsError as err:
        print(f"microcoder keys: {err}")
        return 1
    print(
        f"wrote CurveZMQ keys to {where}; a run in {args.run_dir} uses them (or set buffer.keys_dir)"
    )
    return 0
