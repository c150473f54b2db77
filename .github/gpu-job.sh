# Sourced by the main step of every GPU job, from a checkout the job trusts (the base commit in the gate, main in the
# history):   . TRUSTED/.github/gpu-job.sh TRUSTED
# with JOB_DIR naming a directory of this job alone, which the job's last step removes.
#
# Several jobs, trusted and untrusted, take turns on one box. Whatever a job leaves outside JOB_DIR is read by the
# next one: a kernel binary in CuPy's cache under main's key, a pip configuration pointing at another index, an asv
# machine file naming another GPU. So every such place is moved under JOB_DIR before anything runs, the CUDA stack
# that all jobs share must be read-only to this one, and sgemm itself is installed from TRUSTED into a fresh venv.

: "${JOB_DIR:?JOB_DIR is not set}"
: "${1:?the trusted checkout to install sgemm from}"

chmod -R u+w -- "$JOB_DIR" 2>/dev/null || true
rm -rf -- "$JOB_DIR"
# -m applies to the last component alone: the job's directory first, then what it holds, each the job's alone.
mkdir -p -m 700 "$JOB_DIR"
mkdir -m 700 "$JOB_DIR"/home "$JOB_DIR"/cache "$JOB_DIR"/config "$JOB_DIR"/data "$JOB_DIR"/state "$JOB_DIR"/tmp

# HOME alone covers ~/.asv-machine.json, ~/.cupy, ~/.nv, ~/.cache, ~/.config and ~/.local; the variables below are
# the ones the runner's environment may have pointed elsewhere.
export HOME="$JOB_DIR/home"
export XDG_CACHE_HOME="$JOB_DIR/cache" XDG_CONFIG_HOME="$JOB_DIR/config"
export XDG_DATA_HOME="$JOB_DIR/data" XDG_STATE_HOME="$JOB_DIR/state"
export TMPDIR="$JOB_DIR/tmp"
export CUPY_CACHE_DIR="$JOB_DIR/cache/cupy" CUDA_CACHE_PATH="$JOB_DIR/cache/nv" PIP_CACHE_DIR="$JOB_DIR/cache/pip"
# No pip configuration file is read (pip's rule for os.devnull); PIP_NO_INDEX and PIP_FIND_LINKS set by the
# runner's own environment still apply.
export PIP_CONFIG_FILE=/dev/null
export PYTHONNOUSERSITE=1

# The pre-provisioned CUDA stack is linked into every asv environment of every job on this box: it must belong to
# someone else, or this job could plant code in the next.
IFS=: read -r -a _sgemm_cuda_sites <<< "${SGEMM_CUDA_SITE:-}"
for _site in "${_sgemm_cuda_sites[@]}"; do
    [ -n "$_site" ] || continue
    _writable=$(find "$_site" -writable -print -quit 2>/dev/null)
    if [ -n "$_writable" ]; then
        echo "::error::SGEMM_CUDA_SITE is writable by this job ($_writable): make $_site owned by another user"
        exit 2
    fi
done
unset _sgemm_cuda_sites _site _writable

"${SGEMM_PYTHON:-python3}" -m venv "$JOB_DIR/venv"
"$JOB_DIR/venv/bin/python" -m pip install --quiet --upgrade pip
# Not editable: the code that judges stays a copy in JOB_DIR, apart from the checkouts.
"$JOB_DIR/venv/bin/python" -m pip install --quiet "$(cd "$1" && pwd)[${SGEMM_CUDA_EXTRA:-cuda13},test]"
export PATH="$JOB_DIR/venv/bin:$PATH"
if [ -z "${SGEMM_CUDA_SITE:-}" ]; then
    # No pre-provisioned stack: asv's environments use this job's venv, which goes with JOB_DIR.
    SGEMM_CUDA_SITE=$(python -c "import cupy, pathlib; print(pathlib.Path(cupy.__file__).parents[1])")
    export SGEMM_CUDA_SITE
fi
