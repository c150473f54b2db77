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

# What the job runs and links from outside its own directory, and so also what the next job runs: the Python its venv
# is made from (and that Python's standard library), the pre-provisioned CUDA stack linked into every asv
# environment, the wheelhouse pip installs from. Each must exist (a path that does not exist yet is one a job could
# create) and be writable by no job user, nor any folder above it (a writable parent lets the whole tree be swapped):
# every part of the path, as given and resolved, belongs to neither the runner's user nor the job user, and is open to
# writes by no group or other user except a sticky folder (/tmp), where no one renames another user's entry; every
# entry below it alike. What the job makes fresh under JOB_DIR (its venv) is exempt.
_sgemm_job_uids=" $(id -u) $(id -u "${SGEMM_JOB_USER:-sgemm-job}" 2>/dev/null || true) "
_sgemm_untrusted_part() {  # PATH: the first part of it, or of what it resolves to, a job user could change
    local path part info
    for path in "$1" "$(realpath -e -- "$1" 2>/dev/null)"; do
        [ -n "$path" ] && [ -e "$path" ] || { echo "$1 (does not exist)"; return; }
        part=$path
        while :; do
            info=$(stat -c '%u %a %F' -- "$part") || { echo "$part (cannot stat)"; return; }
            set -- "$1" $info
            case "$_sgemm_job_uids" in *" $2 "*) echo "$part (belongs to uid $2, a job's user)"; return ;; esac
            # A link's own mode means nothing: who may replace it is its folder's business, the next part.
            if [ "$4" != symbolic ] && (( 8#$3 & 8#022 )) \
                    && ! { [ "$4" = directory ] && (( 8#$3 & 8#1000 )) && [ "$part" != "$path" ]; }; then
                echo "$part (mode $3: writable by its group or anyone)"; return
            fi
            [ "$part" = / ] && break
            part=$(dirname -- "$part")
        done
    done
}
_sgemm_untrusted_tree() {  # PATH: its first part, parents or entries below, a job user could change
    local found uid
    found=$(_sgemm_untrusted_part "$1")
    if [ -z "$found" ] && [ -d "$1" ]; then
        local args=()
        for uid in $_sgemm_job_uids; do args+=(-uid "$uid" -o); done
        found=$(find -L "$1" \( "${args[@]}" -perm /022 \) ! -type l -print -quit 2>/dev/null || true)
        [ -z "$found" ] || found="$found (below $1: a job's user or anyone may write it)"
    fi
    echo "$found"
}
_sgemm_refuse_untrusted() {  # WHAT PATH
    local found
    found=$(_sgemm_untrusted_tree "$2")
    if [ -n "$found" ]; then
        echo "::error::$1 $2 could be changed by a job: $found; make it exist, root's and closed to writes"
        exit 2
    fi
}
_sgemm_python=$(command -v -- "${SGEMM_PYTHON:-python3}") \
    || { echo "::error::SGEMM_PYTHON ${SGEMM_PYTHON:-python3}: no such program"; exit 2; }
_sgemm_refuse_untrusted "the Python (SGEMM_PYTHON)" "$_sgemm_python"
_sgemm_stdlib=$("$_sgemm_python" -I -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])' || true)
[ -n "$_sgemm_stdlib" ] || { echo "::error::SGEMM_PYTHON $_sgemm_python does not say where its library is"; exit 2; }
_sgemm_refuse_untrusted "the Python's standard library" "$_sgemm_stdlib"
IFS=: read -r -a _sgemm_cuda_sites <<< "${SGEMM_CUDA_SITE:-}"
for _site in "${_sgemm_cuda_sites[@]}"; do
    [ -z "$_site" ] || _sgemm_refuse_untrusted "SGEMM_CUDA_SITE" "$_site"
done
for _site in ${PIP_FIND_LINKS:-}; do  # pip's own separator is whitespace; a URL is not a path of this box
    case "$_site" in file://*) _site=${_site#file://} ;; *://*) continue ;; esac
    _sgemm_refuse_untrusted "the wheelhouse (PIP_FIND_LINKS)" "$_site"
done
unset _sgemm_cuda_sites _site _sgemm_stdlib

"$_sgemm_python" -m venv "$JOB_DIR/venv"
"$JOB_DIR/venv/bin/python" -m pip install --quiet --upgrade pip
# Not editable: the code that judges stays a copy in JOB_DIR, apart from the checkouts.
"$JOB_DIR/venv/bin/python" -m pip install --quiet "$(cd "$1" && pwd)[${SGEMM_CUDA_EXTRA:-cuda13},test]"
export PATH="$JOB_DIR/venv/bin:$PATH"
if [ -z "${SGEMM_CUDA_SITE:-}" ]; then
    # No pre-provisioned stack: asv's environments use this job's venv, which goes with JOB_DIR.
    SGEMM_CUDA_SITE=$(python -c "import cupy, pathlib; print(pathlib.Path(cupy.__file__).parents[1])")
    export SGEMM_CUDA_SITE
fi
