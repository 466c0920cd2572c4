#!/usr/bin/env bash
# Set up (idempotent), build dist/ and serve the lab at http://127.0.0.1:8000/
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh lab
exec .venv/bin/python build.py serve "$@"
