#!/usr/bin/env bash
# One-time (idempotent) set-up for the lab and its tests on a Debian-like machine:
#   - system packages: chromium (browser tests, WebGPU via SwiftShader) and
#     mesa-vulkan-drivers (lavapipe, for wgpu-py), installed with apt when missing;
#   - node_modules from package-lock.json (npm ci);
#   - a virtual environment .venv with nlpcore (editable) and its test/triton extras.
# Usage: scripts/setup.sh [lab|test]   ("lab" skips the test-only pieces)
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-test}

die() { echo "setup: $*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

have python3 || die "python3 (>= 3.11) is required"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "python3 >= 3.11 is required (found $(python3 --version 2>&1))"
have npm || die "node and npm are required to vendor the Pyodide runtime (apt-get install nodejs npm)"

apt_install() {
  # Install Debian packages that are missing; say clearly when we cannot.
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ] && have apt-get; then
    echo "setup: installing ${missing[*]} with apt-get"
    (apt-get update -qq || true) >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
      || die "apt-get install ${missing[*]} failed"
  elif have sudo && have apt-get; then
    echo "setup: installing ${missing[*]} with sudo apt-get"
    sudo apt-get update -qq >/dev/null || true
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
      || die "apt-get install ${missing[*]} failed"
  else
    die "missing system packages: ${missing[*]} (install them with your package manager)"
  fi
}

if [ "$what" = test ]; then
  apt_install chromium mesa-vulkan-drivers
fi

if [ ! -d node_modules/@pyodide/pyodide ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: npm ci"
  npm ci --no-audit --no-fund --loglevel=error || die "npm ci failed"
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv || die "python3 -m venv failed (apt-get install python3-venv)"
fi
stamp=.venv/.setup-$what
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  if [ "$what" = test ]; then
    .venv/bin/python -m pip install -q -e ".[test,triton]" || die "pip install failed"
  else
    .venv/bin/python -m pip install -q -e . || die "pip install failed"
  fi
  touch "$stamp"
fi

# Python 3.8 + NumPy 1.17.5, the browser's Pyodide versions, so the core kernels are also tested
# on CPython 3.8 (tests/test_py38_compat.py). Optional: skipped where no python3.8 exists.
if [ "$what" = test ] && [ ! -x .venv38/bin/python ]; then
  py38=""
  # pyenv's shim answers `command -v` even where no 3.8 is selected, so try each candidate.
  for c in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.8*/bin/python3.8 "$(command -v python3.8 || true)"; do
    if [ -n "$c" ] && [ -x "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 8)' 2>/dev/null; then
      py38=$c; break
    fi
  done
  if [ -n "$py38" ]; then
    echo "setup: creating .venv38 with $py38 and numpy 1.17.5"
    if ! { "$py38" -m venv .venv38 && .venv38/bin/python -m pip install -q "numpy==1.17.5"; }; then
      echo "setup: warning: could not set up .venv38; the Python 3.8 smoke test will be skipped" >&2
      rm -rf .venv38
    fi
  else
    echo "setup: note: no python3.8 found; the Python 3.8 smoke test will be skipped"
  fi
fi
