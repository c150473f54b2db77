#!/usr/bin/env bash
# Install the job-started hook and the job cleanup for one GPU runner, as root:
#   sudo .github/runner/install-hook.sh gate|history OWNER/REPO RUNNER_DIR [STATE_DIR]
# It writes root-owned copies of job-started.sh (with the role and repository in it) and job-cleanup.py to
# /usr/local/libexec/sgemm-runner/ (job-started-ROLE.sh: the runner runs a hook by its extension, .sh with bash;
# the GPU jobs run job-cleanup.py from there, never from their checkout, which the job's code can rewrite), and
# points the runner at the hook in RUNNER_DIR/.env, which it then makes root-owned too: the runner reads .env at
# start, and a job running as the runner's user must not be able to take the hook line out for the jobs after it.
# STATE_DIR (default /var/lib/sgemm-runner) is root's, writable by the runner's group so that the cleanup can set the
# flag TAINTED there, and append-only (chattr +a) so that no one but root removes it again. Restart the runner's
# service afterwards.
# It also makes the job user (sgemm-job: a system user with no home, no shell, no sudo) and installs job-launch, the
# one program the runner's user may run as root (/etc/sudoers.d/sgemm-runner, checked with visudo): it runs the
# pull request's code as the job user and ends all of it by that user's id (.github/runner/job-launch.py). For the
# gate role, mark an ephemeral runner when provisioning it, as root: touch /etc/sgemm-runner/ephemeral.
# Needs: root, sudo with /etc/sudoers.d, useradd, setuid; a writable cgroup v2 is used where there is one.
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
runner_group=$(stat -c %G "$runner_dir/run.sh")
[ "$runner_group" != root ] || { echo "install-hook.sh: $runner_dir belongs to root: a runner never runs as root" >&2
                                 exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
libexec=/usr/local/libexec/sgemm-runner
hook=$libexec/job-started-$role.sh
install -d -o root -g root -m 755 "$libexec"
install -d -o root -g "$runner_group" -m 770 "$state_dir"
chown root:"$runner_group" "$state_dir" && chmod 770 "$state_dir"
chattr +a "$state_dir" 2>/dev/null || echo "install-hook.sh: warning: chattr +a $state_dir failed (its file" \
    "system has no append-only folders): a job could remove the flag TAINTED; make the gate runner ephemeral" >&2
sed -e "s|@ROLE@|$role|" -e "s|@REPOSITORY@|$repository|" -e "s|@STATE_DIR@|$state_dir|" \
    "$here/job-started.sh" > "$hook.new"
chown root:root "$hook.new" && chmod 755 "$hook.new" && mv "$hook.new" "$hook"
sed -e "s|@STATE_DIR@|$state_dir|" "$here/job-cleanup.py" > "$libexec/job-cleanup.py.new"
chown root:root "$libexec/job-cleanup.py.new" && chmod 755 "$libexec/job-cleanup.py.new"
mv "$libexec/job-cleanup.py.new" "$libexec/job-cleanup.py"

# The job user and the launcher: the runner's user may run the launcher as root and nothing else.
job_user=sgemm-job
command -v sudo > /dev/null && [ -d /etc/sudoers.d ] \
    || { echo "install-hook.sh: no sudo with /etc/sudoers.d: the pull request's code cannot run as a user of its own" >&2
         exit 2; }
id -u "$job_user" > /dev/null 2>&1 \
    || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$job_user"
runner_user=$(stat -c %U "$runner_dir/run.sh")
work_root=$(cd "$runner_dir" && pwd)/_work
install -d -o root -g root -m 755 /run/sgemm-runner /etc/sgemm-runner
sed -e "s|@ROLE@|$role|" -e "s|@STATE_DIR@|$state_dir|" -e "s|@JOB_USER@|$job_user|" -e "s|@WORK_ROOT@|$work_root|" \
    -e "s|@MARKER@|/etc/sgemm-runner/ephemeral|" -e "s|@RUN_DIR@|/run/sgemm-runner|" "$here/job-launch.py" \
    > "$libexec/job-launch.new"
chown root:root "$libexec/job-launch.new" && chmod 755 "$libexec/job-launch.new"
mv "$libexec/job-launch.new" "$libexec/job-launch"
printf '%s ALL=(root) NOPASSWD: %s\n' "$runner_user" "$libexec/job-launch" > /etc/sudoers.d/sgemm-runner.new
chmod 440 /etc/sudoers.d/sgemm-runner.new
visudo -cf /etc/sudoers.d/sgemm-runner.new > /dev/null \
    || { rm -f /etc/sudoers.d/sgemm-runner.new; echo "install-hook.sh: the sudoers rule does not parse" >&2; exit 2; }
mv /etc/sudoers.d/sgemm-runner.new /etc/sudoers.d/sgemm-runner

env_file="$runner_dir/.env"
touch "$env_file"
grep -v '^ACTIONS_RUNNER_HOOK_JOB_STARTED=' "$env_file" > "$env_file.new" || true
echo "ACTIONS_RUNNER_HOOK_JOB_STARTED=$hook" >> "$env_file.new"
chown root:root "$env_file.new" && chmod 644 "$env_file.new" && mv "$env_file.new" "$env_file"
echo "installed $hook and $libexec/job-cleanup.py for $repository; $env_file names the hook (restart the" \
    "runner's service); to clear a flag: chattr -a $state_dir && rm $state_dir/TAINTED && chattr +a $state_dir"
