# Sourced by the README's two commands, in the repository root, with the extras to install after "cuda13," (or
# nothing): the project's virtualenv (.venv, or $SGEMM_VENV) made on a first run and brought up to date on later ones,
# with the CUDA stack of $SGEMM_CUDA_EXTRA (default cuda13; cuda12 for a CUDA 12 driver). Sets $venv to its path.
# pip's own output (its warnings about the box's index settings, a build backend's notes) goes to a log in the
# virtualenv; the terminal gets one line, or, when pip fails, the log's end.
venv=${SGEMM_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
venv=$(cd "$venv" && pwd)
pip_log="$venv/pip-install.log"
echo "environment: bringing $venv up to date (pip's output in $pip_log)" >&2
if ! { "$venv/bin/python" -m pip install --quiet --upgrade pip \
        && "$venv/bin/python" -m pip install --quiet -e ".[${SGEMM_CUDA_EXTRA:-cuda13}${1:+,$1}]"; } > "$pip_log" 2>&1
then
    tail -n 25 "$pip_log" >&2
    echo "environment: pip failed (above, the end of $pip_log)" >&2
    exit 1
fi
