#!/usr/bin/env bash
# The GPU path on one machine with a CUDA GPU (the CPU CI cannot run it). Stages and time budgets:
#   0. a GPU (nvidia-smi)                                                          ~1 s
#   1. the learner on a bare box, <= 5 min: scripts/gpu_check_stage1.py with $PYTHON (needs only
#      torch with CUDA, transformers, safetensors and pydantic; no vLLM, no Ray, no network, no
#      install: microcoder is imported from this checkout). FSDP2 bf16 steps of a random
#      0.5B-shaped Qwen2 at 4K/8K/16K tokens with activation checkpointing off and on, the CUDA
#      peak against the memory plan (learner/memory_plan.py), log-probs against transformers',
#      the publish dtype; then issue 44's knobs on the one GPU (scripts/gpu_check_scale.py, ~90 s):
#      learner.offload none/optimizer/params, 3 steps each from one start at 4K tokens (weights
#      against "none", bit-equal required for "optimizer"; CUDA peak against the plan's; step
#      seconds; moments/shards in pinned host memory), the fallback attention against flash-attn
#      when installed, one 8K step with a sliding window against the plan, and a line each for
#      sequence parallelism and HSDP saying they need >= 2 GPUs (not run). One JSON line per
#      measurement in $LOG/stage1.jsonl (paste it into bench/RESULTS.md).
#   2. the `gpu` extra (vllm==0.32.0, torch==2.13.0: CUDA 13 wheels, NVIDIA driver >= 580) in its
#      own venv, <= 7 min the first time, re-used while pyproject.toml is unchanged
#      (scripts/setup.sh always builds .venv, which stays the CPU one). No network or an old
#      driver: the vLLM stages below are skipped, and the summary says so.
#   3. `pytest -m gpu` (tests/gpu: weight sync into a CUDA receiver over NCCL, or gloo when sender
#      and receiver share the one GPU; CUDA vLLM in-place reload equal to transformers' greedy
#      output; one FSDP2 bf16 step), <= 5 min; only where vLLM is importable,
#   4. a 5-step launch of the tiny model on CUDA (configs/tiny-cpu.toml with the device keys),
#      <= 5 min; only where vLLM is importable,
#   5. one summary line; the exit status is 0 only when every stage that ran passed, and stage 1
#      always runs.
# Usage: scripts/gpu-check.sh   (env: PYTHON=python3 for stage 1 and the venv, VENV=.venv-gpu,
#        PIP_ARGS="--no-index --find-links WHEELS" for an offline wheelhouse, KEEP_RUN=1 to keep
#        the run directory, STAGE1_ONLY=1 to stop after stage 1)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-python3}
VENV=${VENV:-.venv-gpu}
T0=$SECONDS
LOG=runs/gpu-check-$(date +%Y%m%d-%H%M%S)
mkdir -p "$LOG"
say() { echo "gpu-check: $*" >&2; }
summary() {  # summary STATUS DETAIL...
  echo "gpu-check: $1 | $2 | total $((SECONDS - T0)) s | logs $LOG"
}

# --- 0. a GPU -------------------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  summary FAIL "no CUDA GPU: nvidia-smi sees none (this script is for a machine with one)"
  exit 1
fi
GPUS=$(nvidia-smi -L | grep -c '^GPU')
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
say "$GPUS x $GPU_NAME, driver $DRIVER"

# --- 1. the learner on a bare box (torch, transformers, safetensors, pydantic) ---------------------
timeout 300 "$PY" scripts/gpu_check_stage1.py --device cuda >"$LOG/stage1.jsonl" 2>"$LOG/stage1.log"
STAGE1_RC=$?
STAGE1=$(grep '"check": "summary"' "$LOG/stage1.jsonl" | tail -1)
if [ "$STAGE1_RC" = 124 ]; then STAGE1="stage 1: timed out after 300 s (see $LOG/stage1.log)"
elif [ -z "$STAGE1" ]; then STAGE1="stage 1: no summary, rc $STAGE1_RC (see $LOG/stage1.log)"
else STAGE1="stage 1: rc $STAGE1_RC $STAGE1"; fi
say "$STAGE1"
if [ -n "${STAGE1_ONLY:-}" ]; then
  [ "$STAGE1_RC" = 0 ] && S=PASS || S=FAIL
  summary "$S" "$STAGE1 | vLLM stages: not run (STAGE1_ONLY)"
  [ "$S" = PASS ]; exit
fi
vllm_skipped() {  # vllm_skipped REASON: the summary when the vLLM stages cannot run
  [ "$STAGE1_RC" = 0 ] && S=PASS || S=FAIL
  summary "$S" "$STAGE1 | vLLM stages: skipped, $1"
  [ "$S" = PASS ]; exit
}
if [ "${DRIVER%%.*}" -lt 580 ]; then
  vllm_skipped "NVIDIA driver $DRIVER < 580 and the torch 2.13.0 / vllm 0.32.0 wheels are CUDA 13 (update the driver to run them)"
fi

# --- 2. the gpu extra in its own venv (re-used while pyproject.toml is unchanged) --------------
STAMP=$VENV/.gpu-check-stamp
WANT=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV" || vllm_skipped "cannot create $VENV with $PY"
  say "installing microcoder[gpu,dev] into $VENV (first time: a few minutes, several GB of CUDA wheels)"
  # shellcheck disable=SC2086  # PIP_ARGS is a list of options
  if ! timeout 420 "$VENV/bin/python" -m pip install -q ${PIP_ARGS:-} -e ".[gpu,dev]" >"$LOG/pip.log" 2>&1; then
    vllm_skipped "vLLM is not importable: pip install -e .[gpu,dev] failed or took > 7 min (no network? see $LOG/pip.log)"
  fi
fi
# `torch==2.13.0` also matches a local 2.13.0+cpu (a find-links wheelhouse): insist on CUDA.
if ! VERSIONS=$("$VENV/bin/python" - 2>"$LOG/import.log" <<'EOF'
import torch, vllm
assert torch.version.cuda and torch.cuda.is_available(), f"torch {torch.__version__} has no CUDA"
print(f"vllm {vllm.__version__}, torch {torch.__version__} (CUDA {torch.version.cuda})")
EOF
); then
  vllm_skipped "vLLM is not importable in $VENV with CUDA torch (see $LOG/import.log; pip may have taken torch+cpu from a find-links folder: reinstall torch==2.13.0 from PyPI)"
fi
echo "$WANT" >"$STAMP"
say "$VERSIONS"

# --- 3. the GPU tests (vLLM is importable) ------------------------------------------------------------------------------
timeout 300 "$VENV/bin/python" -m pytest -m gpu -q -p no:cacheprovider tests/gpu >"$LOG/pytest.log" 2>&1
TESTS_RC=$?
TESTS=$(grep -Eo '[0-9]+ (passed|failed|error|errors)' "$LOG/pytest.log" | paste -sd ' ' -)
[ "$TESTS_RC" = 124 ] && TESTS="$TESTS timed out after 300 s"
TESTS="gpu tests: ${TESTS:-none ran} (rc $TESTS_RC)"
say "$TESTS"

# --- 4. a 5-step launch of the tiny model on CUDA --------------------------------------------------
# Random tiny weights (no warm start: it would not fit the 5 minutes), so rewards are ~0 and
# dynamic filtering would reject every group: it is off, the run checks the mechanics (generate,
# judge, train, weight sync) and not learning. One GPU per pool when there are two; on a one-GPU
# machine both pools ask for half of it.
if [ "$GPUS" -ge 2 ]; then SHARE=1; else SHARE=0.5; fi
SETS=(--set cluster.device=cuda --set max_steps=5 --set eval.every=0
  --set model.path="$LOG/tiny-model" --set model.warmstart=false --set algorithm.dynamic_filtering=false
  --set "generator.gpus_per_engine=$SHARE" --set "learner.gpus_per_rank=$SHARE"
  --set generator.gpu_memory_utilization=0.3 --set generator.kv_cache_gib=1)
command -v bwrap >/dev/null 2>&1 || SETS+=(--set executor.isolation=none)  # the judge's sandbox
MC=$VENV/bin/microcoder
if ! "$MC" launch configs/tiny-cpu.toml --dry-run --cluster-gpus "$GPUS" "${SETS[@]}" >"$LOG/plan.txt" 2>&1; then
  LAUNCH="launch: not run, the placement plan refuses it: $(grep -m1 'ERROR' "$LOG/plan.txt" | sed 's/^ *ERROR: //')"
  LAUNCH_RC=1
else
  timeout 300 "$MC" launch configs/tiny-cpu.toml --run-dir "$LOG/run" "${SETS[@]}" >"$LOG/launch.log" 2>&1
  LAUNCH_RC=$?
  LAUNCH=$("$VENV/bin/python" - "$LOG/run/metrics.jsonl" "$LAUNCH_RC" <<'EOF'
import json, sys
from pathlib import Path
path, rc = Path(sys.argv[1]), sys.argv[2]
steps = [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.exists() else []
steps = [s for s in steps if s.get("kind") != "eval"]
if not steps:
    print(f"launch: no learner step recorded (rc {rc})")
else:
    last = steps[-1]
    sync = sum(s.get("sync_s", 0.0) for s in steps)
    print(f"launch: {len(steps)}/5 steps, version {last.get('version')}, "
          f"{last.get('gen_tokens_per_s', 0):.0f} gen tok/s, weight sync {sync:.2f} s total (rc {rc})")
EOF
)
  [ "$LAUNCH_RC" = 124 ] && LAUNCH="$LAUNCH, timed out after 300 s"
fi
say "$LAUNCH"
[ -n "${KEEP_RUN:-}" ] || rm -rf "$LOG/run/checkpoints"

# --- 5. one line ---------------------------------------------------------------------------------
STATUS=PASS
[ "$STAGE1_RC" = 0 ] && [ "$TESTS_RC" = 0 ] && [ "$LAUNCH_RC" = 0 ] || STATUS=FAIL
summary "$STATUS" "$STAGE1 | $VERSIONS on $GPUS x $GPU_NAME | $TESTS | $LAUNCH"
[ "$STATUS" = PASS ]
