#!/usr/bin/env bash
# This box's benchmark history brought up to date and published, on a fresh machine or one that ran it before: the
# project's virtualenv (.venv, or $SGEMM_VENV) made or brought up to date with the CUDA stack of $SGEMM_CUDA_EXTRA
# (default cuda13; cuda12 for a CUDA 12 driver), then `sgemm history` (arguments passed on, e.g. --first 5).
# A first run measures the head of main; later runs, every commit since. Without a GPU: the resource history alone.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${SGEMM_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
venv=$(cd "$venv" && pwd)
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e ".[${SGEMM_CUDA_EXTRA:-cuda13}]"
exec "$venv/bin/sgemm" history "$@"
