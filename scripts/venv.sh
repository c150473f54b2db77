# Sourced by the README's two commands, in the repository root, with the extras to install after "cuda13," (or
# nothing): the project's virtualenv (.venv, or $SGEMM_VENV) made on a first run and brought up to date on later ones,
# with the CUDA stack of $SGEMM_CUDA_EXTRA (default cuda13; cuda12 for a CUDA 12 driver). Sets $venv to its path.
venv=${SGEMM_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
venv=$(cd "$venv" && pwd)
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e ".[${SGEMM_CUDA_EXTRA:-cuda13}${1:+,$1}]"
