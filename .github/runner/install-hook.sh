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
# It also installs job-sandbox (.github/runner/job-sandbox.py), which the runner's user runs, as itself, around
# everything that runs a pull request's content (and the history's benchmarks): bubblewrap in a cgroup of the job's
# own; and its settings, /etc/sgemm-runner/sandbox.json (bwrap, the delegated cgroup, memory.max, pids.max, the
# wheelhouse, the runner's folders kept out). Settings from the environment: SGEMM_JOB_CGROUP, SGEMM_JOB_MEMORY_MAX,
# SGEMM_JOB_PIDS_MAX, SGEMM_WHEELHOUSE. Root is needed here, once; nothing runs as root at job time.
# Needs: root, bubblewrap 0.8.0 or later that the runner's user can run, runuser, chattr where it can.
set -euo pipefail
role=${1:?gate or history}
repository=${2:?OWNER/REPO}
runner_dir=${3:?the directory of the runner, holding .env and run.sh}
state_dir=${4:-${SGEMM_INSTALL_ROOT:-}/var/lib/sgemm-runner}
case "$role" in gate|history) ;; *) echo "install-hook.sh: role is gate or history, got '$role'" >&2; exit 2 ;; esac
[[ "$repository" =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] \
    || { echo "install-hook.sh: OWNER/REPO, got '$repository'" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "install-hook.sh: run it as root" >&2; exit 2; }
[ -f "$runner_dir/run.sh" ] || { echo "install-hook.sh: $runner_dir has no run.sh: not a runner" >&2; exit 2; }
runner_group=$(stat -c %G "$runner_dir/run.sh")
[ "$runner_group" != root ] || { echo "install-hook.sh: $runner_dir belongs to root: a runner never runs as root" >&2
                                 exit 2; }

# bwrap must work for the runner's user: Debian 12 lets any user make a user namespace; Ubuntu 24.04 restricts
# them through AppArmor, and needs the profile for bwrap that docs/ci-security.md gives.
bwrap=$(command -v bwrap) || { echo "install-hook.sh: bubblewrap is not installed (apt-get install bubblewrap)" >&2
                               exit 2; }
runner_user=$(stat -c %U "$runner_dir/run.sh")
runner_uid=$(id -u "$runner_user")
probe=(runuser -u "$runner_user" -- "$bwrap" --unshare-user --unshare-pid --ro-bind / / -- /bin/true)
"${probe[@]}" 2> /dev/null || { echo "install-hook.sh: $runner_user cannot make a user namespace with $bwrap" \
    "(Ubuntu 24.04: install the AppArmor profile in docs/ci-security.md)" >&2; exit 2; }

here=$(cd "$(dirname "$0")" && pwd)
root=${SGEMM_INSTALL_ROOT:-}  # a prefix for every system path, for the installer's own test
libexec=$root/usr/local/libexec/sgemm-runner
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

# The sandbox: job-sandbox (root-owned, run by the runner's user; no sudo rule, no job user) and its settings.
# The job's cgroup: below the runner user's own delegated one (the runner as a systemd --user service, with
# lingering), unless SGEMM_JOB_CGROUP names another the runner's user may write (a system service with
# Delegate=memory pids and DelegateSubgroup=runner gives /sys/fs/cgroup/system.slice/UNIT).
cgroup=${SGEMM_JOB_CGROUP:-/sys/fs/cgroup/user.slice/user-$runner_uid.slice/user@$runner_uid.service/sgemm-jobs}
memory_max=${SGEMM_JOB_MEMORY_MAX:-$(( $(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) * 1024 * 3 / 4 ))}
pids_max=${SGEMM_JOB_PIDS_MAX:-4096}
wheelhouse=${SGEMM_WHEELHOUSE:-}
install -d -o root -g root -m 755 "$root/etc/sgemm-runner"
sed -e "s|@SETTINGS@|$root/etc/sgemm-runner/sandbox.json|" "$here/job-sandbox.py" > "$libexec/job-sandbox.new"
chown root:root "$libexec/job-sandbox.new" && chmod 755 "$libexec/job-sandbox.new"
mv "$libexec/job-sandbox.new" "$libexec/job-sandbox"
python3 - "$bwrap" "$cgroup" "$memory_max" "$pids_max" "$wheelhouse" "$runner_dir" "$state_dir" \
    > "$root/etc/sgemm-runner/sandbox.json.new" <<'PY'
import json, os, sys
bwrap, cgroup, memory_max, pids_max, wheelhouse, runner_dir, state_dir = sys.argv[1:]
print(json.dumps({"bwrap": bwrap, "cgroup": cgroup, "memory_max": memory_max, "pids_max": pids_max,
                  "wheelhouse": wheelhouse or None,
                  "forbidden": [os.path.realpath(runner_dir), os.path.realpath(state_dir)]}, indent=1))
PY
chown root:root "$root/etc/sgemm-runner/sandbox.json.new" && chmod 644 "$root/etc/sgemm-runner/sandbox.json.new"
mv "$root/etc/sgemm-runner/sandbox.json.new" "$root/etc/sgemm-runner/sandbox.json"
rm -f "$root/etc/sudoers.d/sgemm-runner"  # the earlier launcher's rule: nothing runs as root at job time now

env_file="$runner_dir/.env"
touch "$env_file"
grep -v '^ACTIONS_RUNNER_HOOK_JOB_STARTED=' "$env_file" > "$env_file.new" || true
echo "ACTIONS_RUNNER_HOOK_JOB_STARTED=$hook" >> "$env_file.new"
chown root:root "$env_file.new" && chmod 644 "$env_file.new" && mv "$env_file.new" "$env_file"
echo "installed $hook and $libexec/job-cleanup.py for $repository; $env_file names the hook (restart the" \
    "runner's service); to clear a flag: chattr -a $state_dir && rm $state_dir/TAINTED && chattr +a $state_dir"
