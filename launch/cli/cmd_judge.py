"""`microcoder judge --problems P --solutions S [--out V.jsonl] [--workers N] [--all-tests]`,
and `microcoder judge serve [--host H] [--port P] [--workers N]`: the judge service of the `http`
backend (sandbox/remote/server.py)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from microcoder.launch.cliargs import add_format_argument, add_set_argument


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "judge",
        help="judge solutions against problems in the sandbox; verdicts as JSONL + a summary "
        "(`judge serve`: the judge service of executor.backend = 'http')",
        description="Judge every solution (JSONL: problem_id, code, optional id) against its "
        "problem (our JSONL or any loader format) in the bubblewrap sandbox pool. `microcoder "
        "judge serve` instead runs the judge service trainers reach with executor.backend = "
        "'http' (PUT /problems/<ref>, POST /judge; protocol in sandbox/remote/client.py; "
        "executor.judge_url may list several such services). It keeps the problems it was sent "
        "(executor.judge_cache_mb) so their tests cross the network once. It runs untrusted "
        "programs for whoever reaches it: bind it to a private network; set "
        "MICROCODER_JUDGE_TOKEN on the server and the trainers to require a shared token.",
    )
    p.add_argument("action", nargs="?", choices=["serve"], help="serve: run the judge service")
    p.add_argument("--problems", help="problem file (JSONL/JSON, optionally .gz)")
    p.add_argument("--solutions", help="JSONL: {problem_id, code, id?} per line")
    p.add_argument("--host", default="127.0.0.1", help="serve: address to bind (127.0.0.1)")
    p.add_argument("--port", type=int, default=8790, help="serve: port (8790; 0 = any free)")
    p.add_argument("--out", help="write one verdict per line here (JSONL); default: stdout")
    p.add_argument("--workers", type=int, default=0, help="sandbox workers (default: CPU count)")
    p.add_argument("--all-tests", action="store_true", help="run every test (partial credit)")
    add_format_argument(p)
    p.add_argument("--config", help="TOML config whose [executor] section is used")
    add_set_argument(p, "executor.isolation=none")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"microcoder judge: {message}", file=sys.stderr)
    return 2


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve(args: argparse.Namespace) -> int:
    """`microcoder judge serve`: the judge service, until Ctrl-C."""
    from microcoder.launch.config import load_config
    from microcoder.sandbox import SandboxUnavailable
    from microcoder.sandbox.remote.server import make_server

    cfg = load_config(args.config, args.overrides).executor
    if args.workers:
        cfg = cfg.model_copy(update={"workers": args.workers})
    try:
        server = make_server(cfg, args.host, args.port)
    except (SandboxUnavailable, OSError) as e:
        return _fail(str(e))
    # Ctrl-C and SIGTERM stop the service, also where SIGINT was inherited as ignored (a
    # background job of a script, a test runner's worker): Python then raises nothing on it
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    try:  # a Ctrl-C right after the banner also ends in close() and exit status 0
        print(
            f"microcoder judge serve: {server.url} ({server.pool.size} workers, isolation "
            f"{cfg.isolation}, problem cache {cfg.judge_cache_mb} MiB); trainers: "
            f"executor.backend = 'http', executor.judge_url = '{server.url}' (or a list)",
            file=sys.stderr,
            flush=True,
        )
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def run(args: argparse.Namespace) -> int:
    if args.action == "serve":
        return serve(args)
    if not args.problems or not args.solutions:
        return _fail("--problems and --solutions are needed (or `microcoder judge serve`)")
    from microcoder.data.problem import ProblemFormatError
    from microcoder.launch.config import load_config
    from microcoder.sandbox import SandboxUnavailable
    from microcoder.sandbox.backends import make_judge
    from microcoder.sandbox.inputs import load_problem_file, read_solutions
    from microcoder.sandbox.languages import check_compilers
    from microcoder.sandbox.remote.client import JudgeServerUnavailable
    from microcoder.sandbox.summary import Progress, summary_table

    try:
        problems = load_problem_file(args.problems, args.format)
        solutions = read_solutions(args.solutions, problems)
    except (ProblemFormatError, OSError, ValueError) as e:
        return _fail(str(e))
    cfg = load_config(args.config, args.overrides).executor
    updates = {"partial_credit": True} if args.all_tests else {}
    if args.workers:
        updates["workers"] = args.workers
    cfg = cfg.model_copy(update=updates)
    if cfg.backend == "local":
        try:  # C++ / Java problems need their compiler here
            check_compilers({p.language for p in problems.values()}, args.problems)
        except SandboxUnavailable as e:
            return _fail(str(e))
    out = open(args.out, "w") if args.out else sys.stdout  # noqa: SIM115
    verdicts = []
    start = time.perf_counter()
    try:
        with make_judge(cfg) as pool:
            for sol in solutions:
                pool.submit(problems[sol["problem_id"]], sol["code"], sol["id"])
            progress = Progress(len(solutions), enabled=not args.quiet and sys.stderr.isatty())
            for v in pool.as_completed():
                verdicts.append(v)
                out.write(json.dumps(v.to_dict(), ensure_ascii=False) + "\n")
                progress.update(v)
            progress.close()
    except (SandboxUnavailable, JudgeServerUnavailable) as e:
        return _fail(str(e))
    finally:
        if out is not sys.stdout:
            out.close()
    elapsed = time.perf_counter() - start
    print(summary_table(verdicts, elapsed, problems), file=sys.stderr)
    return 0
