"""The status of a run as one dict (what `/api/status` answers) and as one terminal screen.

`build_status` is pure: the live server feeds it the pools' replica stats, `microcoder status`
on a finished run feeds it what metrics.jsonl and launcher.log hold. `render_status` turns the
dict into the screen `microcoder status` prints.
"""

from __future__ import annotations

import time
from typing import Any

from microcoder.launch.monitor.memory_view import memory_lines

POOLS = ("generator", "executor", "learner")
EVAL_POOL = "eval-generator"
"""The pool of the generators set aside for the eval (eval.generators > 0), shown after POOLS."""


def _f(x: Any, default: float = 0.0) -> float:
    return float(x) if isinstance(x, (int, float)) else default


def replica_row(kind: str, stats: dict[str, Any]) -> dict[str, Any]:
    """One replica's line: name, node IP, rate, idle fraction, restarts, version, error."""
    rate_key = "tokens_per_s" if kind == "generator" else "tests_per_s"
    row = {"name": stats.get("name", "?"), "restarts": int(_f(stats.get("restarts")))}
    if stats.get("node_ip"):
        row["node_ip"] = str(stats["node_ip"])  # the node hosting it, as Ray reports it
    if "error" in stats:
        row["error"] = str(stats["error"])
        return row
    row["rate"] = _f(stats.get(rate_key))
    row["idle_frac"] = _f(stats.get("idle_frac"))
    if "version" in stats:
        row["version"] = int(_f(stats["version"]))
    return row


def build_status(
    latest_step: dict[str, Any],
    latest_eval: dict[str, Any] | None = None,
    errors: list[str] | None = None,
    replicas: dict[str, list[dict[str, Any]]] | None = None,
    meta: dict[str, Any] | None = None,
    memory: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Status from the newest step record; `replicas` (live only) gives per-replica rows and
    `memory` (live only) every actor's memory now, else the step record's is shown
    (launch/monitor/memory_view.py `memory_section`).

    meta: run, run_dir, state ("running"/"finished"/"stopped"), source ("live"/"files"),
    max_steps, started (unix s), dashboard (URL), world_size, buffer_address and
    weight_channel_address (live only: what the buffer and learner rank 0 publish),
    eval_generators (eval.generators) and eval_activity (live only: launch/run/cluster.py
    `Run.eval_activity`); with eval.generators > 0 `pools` has "eval-generator" too
    (`eval_pool_section`).
    """
    s = latest_step or {}
    meta = meta or {}
    replicas = replicas or {}
    buf = s.get("buffer") or {}
    step_s = _f(s.get("step_s"))
    pools = _pools_section(s, replicas, meta)
    if int(_f(meta.get("eval_generators"))) or replicas.get(EVAL_POOL):
        pools[EVAL_POOL] = eval_pool_section(
            int(_f(meta.get("eval_generators"))),
            replicas.get(EVAL_POOL) or [],
            meta.get("eval_activity") or {},
            latest_eval,
        )
    hist = buf.get("staleness_hist") or {}
    return {
        "run": meta.get("run", ""),
        "run_dir": meta.get("run_dir", ""),
        "state": meta.get("state", "unknown"),
        "source": meta.get("source", "files"),
        "dashboard": meta.get("dashboard", ""),
        "buffer_address": meta.get("buffer_address", ""),
        "weight_channel_address": meta.get("weight_channel_address", ""),
        "step": int(_f(s.get("step"))),
        "max_steps": meta.get("max_steps"),
        "version": int(_f(s.get("policy_version"), _f(buf.get("version")))),
        "started": meta.get("started"),
        "updated": s.get("time"),
        "pools": pools,
        "rates": {
            "gen_tokens_per_s": _f(s.get("gen_tokens_per_s")),
            "train_tokens_per_s": _f(s.get("tokens_per_s")),
            "tests_per_s": _f(s.get("tests_per_s")),
            "step_s": step_s,
        },
        "buffer": _buffer_section(buf),
        "staleness": {
            "mean": _f(s.get("staleness_mean")),
            "max": _f(s.get("staleness_max")),
            "max_allowed": buf.get("max_staleness"),
            "hist": {str(k): int(v) for k, v in sorted(hist.items(), key=lambda kv: int(kv[0]))},
        },
        "idle": {
            "generator": _f(s.get("generator_idle_frac")),
            "executor": _f(s.get("executor_idle_frac")),
            "learner": _f(s.get("wait_s")) / step_s if step_s > 0 else 0.0,
        },
        "learning": {
            k: s[k]
            for k in (
                "reward_mean",
                "loss",
                "clip_frac",
                "entropy",
                "temperature",
                "diversity",
                "sync_s",
            )
            if isinstance(s.get(k), (int, float))
        },
        "eval": {
            k: v
            for k, v in (latest_eval or {}).items()
            if k.startswith("heldout") and isinstance(v, (int, float))
        },
        "memory": memory if memory is not None else dict(s.get("memory") or {}),
        "errors": list(errors or [])[-10:],
    }


def _pools_section(s: dict, replicas: dict, meta: dict) -> dict[str, Any]:
    """Per pool: its replica count (the live rows', else the step record's) and its rows."""
    counts = {
        "generator": int(_f(s.get("generators"), len(replicas.get("generator", [])))),
        "executor": int(_f(s.get("executors"), len(replicas.get("executor", [])))),
        "learner": int(_f(meta.get("world_size"), 1)),
    }
    pools = {}
    for kind in POOLS:
        rows = [replica_row(kind, r) for r in replicas.get(kind, [])]
        pools[kind] = {"count": len(rows) if rows else counts[kind], "replicas": rows}
    return pools


def eval_pool_section(
    count: int,
    replicas: list[dict[str, Any]],
    activity: dict[str, Any],
    latest_eval: dict[str, Any] | None,
) -> dict[str, Any]:
    """The generators set aside for the eval (eval.generators, launch/run/eval_beside.py) as a
    pool of its own: count, state ("evaluating" while an eval samples on them, "idle" between
    evals, "no eval yet"), the eval's step and the policy version it samples (or last sampled)
    at, and per replica the usual row plus its own state. `activity` is the live run's
    `Run.eval_activity`; a run read from its files has the newest eval record instead."""
    if not activity and latest_eval and latest_eval.get("eval_generators"):
        activity = {
            "state": "idle",
            "step": latest_eval.get("step"),
            "version": latest_eval.get("policy_version"),
            "replicas": list(latest_eval["eval_generators"]),
            "since": latest_eval.get("time"),
        }
    state = activity.get("state", "no eval yet")
    busy = set(activity.get("replicas") or []) if state == "evaluating" else set()
    rows = []
    for r in replicas:
        row = replica_row("generator", r)
        if "error" not in row:
            row["state"] = "evaluating" if row["name"] in busy else "idle"
        rows.append(row)
    return {
        "count": len(rows) if rows else count,
        "replicas": rows,
        "state": state,
        "step": activity.get("step"),
        "version": activity.get("version"),
        "since": activity.get("since"),
    }


def _buffer_section(buf: dict) -> dict[str, Any]:
    """The buffer's depths, counters, admission capacity, invariant and refused requests."""
    return {
        "depths": dict(buf.get("depths") or {}),
        **{k: buf.get(k) for k in ("in_flight", "issued", "consumed", "dropped_stale", "failed")},
        "admission_capacity": buf.get("admission_capacity"),
        "invariant_ok": buf.get("invariant_ok"),
        "invariant_violations": list(buf.get("invariant_violations") or []),
        # requests the buffer refused, by code (path_refused, malformed, bad_field, ...)
        "errors": {str(k): int(_f(v)) for k, v in sorted((buf.get("errors") or {}).items())},
    }


def _age(t: float | None, now: float) -> str:
    if not t:
        return "never"
    sec = max(0.0, now - t)
    return (
        f"{sec:.0f} s ago"
        if sec < 120
        else f"{sec / 60:.0f} min ago"
        if sec < 7200
        else f"{sec / 3600:.1f} h ago"
    )


def _v(x: Any) -> str:
    return "-" if x is None else str(x)


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def render_status(st: dict[str, Any], now: float | None = None) -> str:
    """One screen of text for `microcoder status`."""
    now = time.time() if now is None else now
    steps = f"{st['step']}/{st['max_steps']}" if st.get("max_steps") else str(st["step"])
    out = [
        f"run {st['run']}  [{st['state']}, from {st['source']}]  {st['run_dir']}",
        f"step {steps}   policy version {st['version']}   last step {_age(st.get('updated'), now)}",
    ]
    if st.get("dashboard"):
        out.append(f"dashboard {st['dashboard']}")
    if st.get("buffer_address") or st.get("weight_channel_address"):
        out.append(
            f"buffer {st.get('buffer_address') or '-'}   "
            f"weight channels {st.get('weight_channel_address') or '-'}"
        )
    r = st["rates"]
    idle = st["idle"]
    out += [
        "",
        f"rates    generated {r['gen_tokens_per_s']:9.1f} tok/s   trained {r['train_tokens_per_s']:9.1f} tok/s"
        f"   judged {r['tests_per_s']:8.1f} tests/s   step {r['step_s']:.2f} s",
        "pools",
    ]
    for kind in POOLS:
        pool = st["pools"][kind]
        idle_txt = f"idle {_pct(idle[kind])}"
        out.append(f"  {kind + 's':<11}{pool['count']:>3} replica(s)   {idle_txt}")
        unit = "tok/s" if kind == "generator" else "tests/s"
        for rep in pool["replicas"]:
            if "error" in rep:
                out.append(f"    {rep['name']:<14} ERROR {rep['error']}")
                continue
            ver = f"   v{rep['version']}" if "version" in rep else ""
            ver += f"   on {rep['node_ip']}" if rep.get("node_ip") else ""
            out.append(
                f"    {rep['name']:<14}{rep['rate']:9.1f} {unit + ' busy':<13} idle {_pct(rep['idle_frac'])}"
                f"   restarts {rep['restarts']}{ver}"
            )
    if EVAL_POOL in st["pools"]:
        out += eval_pool_lines(st["pools"][EVAL_POOL], now)
    b = st["buffer"]
    stl = st["staleness"]
    depths = "  ".join(f"{k} {v}" for k, v in b["depths"].items()) or "-"
    inv = {True: "ok", False: "VIOLATED", None: "?"}[b.get("invariant_ok")]
    out += [
        f"buffer   {depths}   (in flight {_v(b.get('in_flight'))}, capacity {_v(b.get('admission_capacity'))})",
        f"         issued {_v(b.get('issued'))}  consumed {_v(b.get('consumed'))}  "
        f"dropped stale {_v(b.get('dropped_stale'))}  failed {_v(b.get('failed'))}  invariant {inv}",
    ]
    out += [f"         ! {v}" for v in b.get("invariant_violations", [])]
    refused = "  ".join(f"{k} {v}" for k, v in b.get("errors", {}).items())
    out.append(f"         refused requests {refused or 'none'}")
    hist = "  ".join(f"{k}:{v}" for k, v in stl["hist"].items()) or "-"
    allowed = stl.get("max_allowed")
    out.append(
        f"staleness mean {stl['mean']:.2f}  max {stl['max']:.0f}"
        + (f" (allowed {allowed})" if allowed is not None else "")
        + f"   consumed by staleness {hist}"
    )
    out += memory_lines(st.get("memory") or {})
    learn = "   ".join(f"{k} {v:.4g}" for k, v in st["learning"].items())
    if learn:
        out.append(f"learning {learn}")
    if st["eval"]:
        out.append("eval     " + "   ".join(f"{k} {v:.3f}" for k, v in st["eval"].items()))
    out.append("last errors" + ("" if st["errors"] else "  none"))
    out += [f"  {e}" for e in st["errors"]]
    return "\n".join(out)


def eval_pool_lines(pool: dict[str, Any], now: float) -> list[str]:
    """The status screen's lines of the generators set aside for the eval."""
    if pool.get("state") in ("evaluating", "idle"):
        doing = "evaluating" if pool["state"] == "evaluating" else "idle; last evaluated"
        doing += f" step {_v(pool.get('step'))} at policy version {_v(pool.get('version'))}"
        doing += f" (since {_age(pool.get('since'), now)})" if pool.get("since") else ""
    else:
        doing = "no eval yet"
    out = [f"  {'eval-gens':<11}{pool['count']:>3} replica(s)   {doing}"]
    for rep in pool["replicas"]:
        if "error" in rep:
            out.append(f"    {rep['name']:<17} ERROR {rep['error']}")
            continue
        ver = f"   v{rep['version']}" if "version" in rep else ""
        ver += f"   on {rep['node_ip']}" if rep.get("node_ip") else ""
        out.append(f"    {rep['name']:<17} {rep['state']:<11} restarts {rep['restarts']}{ver}")
    return out
