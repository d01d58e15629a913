"""The `--set` overrides that run a command's Generator and Executor actors on a CPU test
machine (`microcoder eval`, `microcoder data filter`): the CPU device, one sandbox worker, a 1 GiB
KV cache and an eager engine (no torch.compile: it starts about twice as soon)."""

CPU_ACTOR_SETS = (
    "--set",
    "cluster.device=cpu",
    "--set",
    "executor.workers=1",
    "--set",
    "generator.kv_cache_gib=1",
    "--set",
    "generator.enforce_eager=true",
)
