#!/usr/bin/env bash
# The GPU runner's job-started hook (ACTIONS_RUNNER_HOOK_JOB_STARTED): run by the runner before every job, it lets
# through the one job this runner exists for and refuses everything else, so that a label is not the boundary.
#
# A pull request can add a workflow file of its own (or a job to ci.yml) with `runs-on` naming the GPU labels; the
# labels match case-insensitively, and a job without `self-hosted` can still land on a self-hosted runner. What it
# cannot change is the workflow a job comes from on `main`: GITHUB_WORKFLOW_REF names the file and the ref the run
# was defined at (for `pull_request_target`, the base branch's), and GITHUB_EVENT_NAME the event.
#   role gate:    .github/workflows/gpu-gate.yml@refs/heads/main, job `gate`, on pull_request_target
#   role history: .github/workflows/gpu-history.yml@refs/heads/main, job `benchmark`, on push, schedule or
#                 workflow_dispatch
# Anything left of an earlier job that its cleanup found (job-cleanup.py: a process that outlived it, a file it
# planted, a file command it wrote) sets the flag file TAINTED: then every job is refused until an administrator has
# looked at the box and removed it.
#
# Installed by install-hook.sh as root, which writes ROLE, REPOSITORY and STATE_DIR below into a root-owned copy;
# the copy in the repository is never run by a runner.
set -u
ROLE="@ROLE@"
REPOSITORY="@REPOSITORY@"
STATE_DIR="@STATE_DIR@"

refuse() {
    echo "sgemm runner ($ROLE): refused: $*" >&2
    echo "::error::this GPU runner runs only ${REPOSITORY}'s $expected; refused: $*"
    exit 1
}

case "$ROLE" in
    gate) workflow="gpu-gate.yml"; job="gate"; events="pull_request_target" ;;
    history) workflow="gpu-history.yml"; job="benchmark"; events="push schedule workflow_dispatch" ;;
    *) expected="(nothing: not installed)"; refuse "the hook was not installed with a role (gate or history)" ;;
esac
expected="$workflow job '$job' from main, on ${events// / or }"

# -L too: a dangling link is a flag all the same (the folder is append-only: nothing placed in it can go).
# Read only a regular file: a FIFO named TAINTED would hang the hook until the job's time ran out.
if [ -e "$STATE_DIR/TAINTED" ] || [ -L "$STATE_DIR/TAINTED" ]; then
    if [ -f "$STATE_DIR/TAINTED" ] && [ ! -L "$STATE_DIR/TAINTED" ]; then
        said=$(head -c 300 "$STATE_DIR/TAINTED" | tr -d '\n')
    else
        said="TAINTED is no regular file"
    fi
    refuse "an earlier job left something behind ($said); an" \
        "administrator must check the box and remove $STATE_DIR/TAINTED"
fi
want_ref="$REPOSITORY/.github/workflows/$workflow@refs/heads/main"
[ "${GITHUB_REPOSITORY:-}" = "$REPOSITORY" ] \
    || refuse "the job is of repository '${GITHUB_REPOSITORY:-}'"
[ "${GITHUB_WORKFLOW_REF:-}" = "$want_ref" ] \
    || refuse "the job's workflow is '${GITHUB_WORKFLOW_REF:-}', not $want_ref"
[ "${GITHUB_JOB:-}" = "$job" ] || refuse "the job is '${GITHUB_JOB:-}', not '$job'"
event_ok=""
for event in $events; do
    [ "${GITHUB_EVENT_NAME:-}" = "$event" ] && event_ok=1
done
[ -n "$event_ok" ] || refuse "the event is '${GITHUB_EVENT_NAME:-}'"
echo "sgemm runner ($ROLE): $GITHUB_WORKFLOW_REF job $GITHUB_JOB on $GITHUB_EVENT_NAME accepted"
