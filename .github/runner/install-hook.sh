#!/usr/bin/env bash
# Install the job-started hook for one GPU runner, as root:
#   sudo .github/runner/install-hook.sh gate|history OWNER/REPO RUNNER_DIR [STATE_DIR]
# It writes a root-owned copy of job-started.sh with the role and repository in it to
# /usr/local/libexec/sgemm-runner/job-started-ROLE, makes STATE_DIR (default /var/lib/sgemm-runner) root-owned and
# closed to writes by anyone else, and points the runner at the hook in RUNNER_DIR/.env, which it then makes
# root-owned too: the runner reads .env at start, and a job running as the runner's user must not be able to take
# the hook line out for the jobs after it. Restart the runner's service afterwards.
set -euo pipefail
role=${1:?gate or history}
repository=${2:?OWNER/REPO}
runner_dir=${3:?the directory of the runner, holding .env and run.sh}
state_dir=${4:-/var/lib/sgemm-runner}
case "$role" in gate|history) ;; *) echo "install-hook.sh: role is gate or history, got '$role'" >&2; exit 2 ;; esac
[[ "$repository" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] \
    || { echo "install-hook.sh: OWNER/REPO, got '$repository'" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "install-hook.sh: run it as root" >&2; exit 2; }
[ -f "$runner_dir/run.sh" ] || { echo "install-hook.sh: $runner_dir has no run.sh: not a runner" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
hook=/usr/local/libexec/sgemm-runner/job-started-$role
install -d -o root -g root -m 755 /usr/local/libexec/sgemm-runner "$state_dir"
sed -e "s|@ROLE@|$role|" -e "s|@REPOSITORY@|$repository|" -e "s|@STATE_DIR@|$state_dir|" \
    "$here/job-started.sh" > "$hook.new"
chown root:root "$hook.new" && chmod 755 "$hook.new" && mv "$hook.new" "$hook"

env_file="$runner_dir/.env"
touch "$env_file"
grep -v '^ACTIONS_RUNNER_HOOK_JOB_STARTED=' "$env_file" > "$env_file.new" || true
echo "ACTIONS_RUNNER_HOOK_JOB_STARTED=$hook" >> "$env_file.new"
chown root:root "$env_file.new" && chmod 644 "$env_file.new" && mv "$env_file.new" "$env_file"
echo "installed $hook for $repository; $env_file names it (restart the runner's service)"
