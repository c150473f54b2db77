#!/usr/bin/env bash
# This box's benchmark history brought up to date and published, on a fresh machine or one that ran it before: the
# project's virtualenv (scripts/venv.sh), then `sgemm history` (arguments passed on, e.g. --first 5 or --gpus all).
# A first run measures the head of main; later runs, every commit since. Without a GPU: the resource history alone.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh ""  # (an argument of its own: a sourced script would see ours)
exec "$venv/bin/sgemm" history "$@"
