#!/usr/bin/env bash
# Set up (idempotent) and run the whole test suite: unit, property, WebGPU-native
# (wgpu-py on lavapipe), Triton interpreter and Playwright browser tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh test
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp/xdg-runtime-$(id -u)}
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
.venv/bin/python build.py
exec .venv/bin/python -m pytest "$@"
