#!/usr/bin/python3 -I
"""Runs what executes a pull request's content (a round's process, a launch probe, asv's builds and benchmarks, the
history's commands) inside bubblewrap, as the runner's own user, with no sudo and no root at job time:

  job-sandbox [--ro PATH]... [--rw PATH]... [--gpu N|all]... [--env NAME=VALUE]... [--machine-file PATH]
              [--cwd PATH] -- COMMAND [ARG]...

Inside: new user, PID, IPC, network, UTS and cgroup namespaces, no capabilities, no new privileges (bwrap sets
them) and no further user namespaces; the root file system's /usr and a few files of /etc read-only; a fresh /proc
and a minimal /dev with the NVIDIA device nodes of the named cards alone; tmpfs /tmp, /var/tmp, /run and /dev/shm
(HOME is /tmp/home, fresh); only the paths given with --ro (read-only) and --rw; the environment cleared but for a
fixed list, pip pointed at the runner's read-only wheelhouse. --die-with-parent and --new-session: the job dies with
this launcher and cannot reach its terminal. The PID namespace ends every process of the job when its first ends.

The whole job runs in a cgroup v2 of its own, below the runner service's delegated cgroup (systemd: Delegate=yes in
the runner's unit; install-hook.sh), with memory.max, memory.swap.max and pids.max; when the command ends, or this
launcher gets SIGTERM, SIGINT or SIGHUP, cgroup.kill ends every process of it at once. tmpfs pages count against
memory.max, so a job that fills its /tmp is killed, not the box.

Refuses (exit 2, one line, nothing run, nothing changed) when bwrap is missing or older than 0.8.0, the host allows
no unprivileged user namespace, the delegated cgroup is missing or lacks the memory and pids controllers, a --ro or
--rw path is a link, not there, or lies inside the runner's folders, or a name given with --env is not allowed.
There is no way to run the command without the sandbox. Exits with the command's status, or 3 when the cgroup ran
out of memory or processes or could not be emptied.

Installed by install-hook.sh as a root-owned copy; its settings come from the root-owned /etc/sgemm-runner/sandbox.json
(bwrap, cgroup, memory_max, pids_max, wheelhouse, forbidden).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

SETTINGS = Path("@SETTINGS@")  # /etc/sgemm-runner/sandbox.json, written in by install-hook.sh
MIN_VERSION = (0, 8, 0)  # --disable-userns came with 0.8.0
# CUDA_VISIBLE_DEVICES: a gate over several cards gives each round's process its own card by UUID; which cards the
# job can open at all is decided by the device nodes bound in, not by this variable.
ALLOWED_ENV = {"SGEMM_CUDA_SITE", "SGEMM_CUDA_EXTRA", "BASE_SHA", "HEAD_SHA", "RANGE_INPUT", "LANG",
               "SGEMM_CASE_EVENTS", "SGEMM_NVBENCH_ARGS", "SGEMM_RUN_CASES", "PATH_PREFIX", "PYTHONPATH",
               "CUDA_VISIBLE_DEVICES", "CUPY_CACHE_DIR", "SGEMM_CACHE_DIR"}
ETC = ("passwd", "group", "hosts", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives",
       "ssl", "ca-certificates", "localtime", "os-release", "nvidia", "OpenCL", "vulkan", "gitconfig")
GPU_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps")
HOME = "/tmp/home"
KILL_WAIT_S = 10.0


class Refused(Exception):
    """The sandbox cannot be made as it must be: nothing is run."""


def refuse(message: str) -> int:
    print(f"::error::job-sandbox: {message}; not run", flush=True)
    return 2


def load_settings(path: Path) -> dict:
    try:
        settings = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise Refused(f"cannot read the settings {path} ({exc.__class__.__name__}): install-hook.sh writes them")
    missing = {"bwrap", "cgroup", "memory_max", "pids_max", "forbidden"} - settings.keys()
    if missing:
        raise Refused(f"the settings {path} lack {', '.join(sorted(missing))}")
    return settings


def bwrap_version(bwrap: str) -> tuple:
    try:
        done = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Refused(f"bubblewrap ({bwrap}) cannot run: {exc.__class__.__name__}: install the bubblewrap package")
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", done.stdout)
    if done.returncode or not found:
        raise Refused(f"{bwrap} --version said {done.stdout.strip()[:60]!r}: not bubblewrap")
    version = tuple(int(part or 0) for part in found.groups())
    if version < MIN_VERSION:
        raise Refused(f"bubblewrap {'.'.join(map(str, version))} is older than "
                      f"{'.'.join(map(str, MIN_VERSION))} (no --disable-userns)")
    return version


def check_user_namespaces(bwrap: str) -> None:
    done = subprocess.run([bwrap, "--unshare-user", "--unshare-pid", "--ro-bind", "/", "/", "--", "/bin/true"],
                          capture_output=True, text=True, timeout=30)
    if done.returncode:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1][:160]
        raise Refused(f"this host lets no unprivileged process make a user namespace ({said}): on Ubuntu 24.04 "
                      "install the AppArmor profile for bwrap (docs/ci-security.md)")


def given_path(text: str, forbidden: list) -> Path:
    path = Path(text)
    if not path.is_absolute() or ".." in path.parts:
        raise Refused(f"{text}: not an absolute path")
    if path.is_symlink() or not path.exists():
        raise Refused(f"{text}: a link or not there")
    real = Path(os.path.realpath(path))
    for place in forbidden:
        place = Path(os.path.realpath(place))
        if real == place or real.is_relative_to(place) or place.is_relative_to(real):
            raise Refused(f"{text}: inside or above {place}, the runner's own (nothing of it enters the sandbox)")
    return real


def parse(argv: list, settings: dict) -> dict:
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        raise Refused("usage: job-sandbox [--ro PATH]... [--rw PATH]... [--gpu N|all]... [--env NAME=VALUE]... "
                      "[--cwd PATH] -- COMMAND [ARG]...")
    split = argv.index("--")
    given, command = argv[:split], argv[split + 1:]
    job = {"ro": [], "rw": [], "gpus": [], "env": {}, "cwd": None, "machine": None, "command": command}
    if len(given) % 2:
        raise Refused(f"{given[-1]}: an option without its value")
    for option, value in zip(given[::2], given[1::2]):
        if option in ("--ro", "--rw"):
            job[option[2:]].append(given_path(value, settings["forbidden"]))
        elif option == "--gpu":
            if value != "all" and not value.isdigit():
                raise Refused(f"--gpu {value}: a card's index or all")
            job["gpus"].append(value)
        elif option == "--env":
            name, _, text = value.partition("=")
            if name not in ALLOWED_ENV:
                raise Refused(f"--env {name}: only {', '.join(sorted(ALLOWED_ENV))} reach the job")
            job["env"][name] = text
        elif option == "--machine-file":  # asv's ~/.asv-machine.json in the fresh HOME: the caller's own copy
            job["machine"] = given_path(value, settings["forbidden"])
        elif option == "--cwd":
            job["cwd"] = value
        else:
            raise Refused(f"{option}: not an option of job-sandbox")
    return job


def gpu_nodes(gpus: list, dev: Path = Path("/dev")) -> list:
    """The device nodes the driver and CUDA need for these cards: each card's own, and the shared control nodes."""
    if not gpus:
        return []
    cards = sorted(path.name for path in dev.glob("nvidia[0-9]*")) if "all" in gpus else \
        [f"nvidia{index}" for index in gpus]
    missing = [card for card in cards if not (dev / card).exists()]
    if missing or not cards:
        raise Refused(f"no device node {', '.join(missing) or 'nvidia*'} under {dev}")
    return [str(dev / name) for name in (*cards, *GPU_NODES) if (dev / name).exists()]


def system_binds() -> list:
    """/usr read-only, the merged-/usr links (or the folders) beside it, and the few files of /etc a program needs."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64"):
        top = Path("/", name)
        if top.is_symlink():
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    for name in ETC:
        if Path("/etc", name).exists():
            args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    if Path("/opt").is_dir():
        args += ["--ro-bind", "/opt", "/opt"]
    return args


def environment(job: dict, settings: dict) -> dict:
    path = "/usr/local/bin:/usr/bin:/bin"
    if job["env"].get("PATH_PREFIX"):
        path = f"{job['env'].pop('PATH_PREFIX')}:{path}"
    env = {"PATH": path, "HOME": HOME, "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONNOUSERSITE": "1",
           "PIP_CONFIG_FILE": "/dev/null", "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
           # MPS's folders inside the job's own /tmp: no daemon it starts is seen outside, none outside is seen here.
           "CUDA_MPS_PIPE_DIRECTORY": "/tmp/nvidia-mps", "CUDA_MPS_LOG_DIRECTORY": "/tmp/nvidia-mps-log"}
    if settings.get("wheelhouse"):
        env["PIP_FIND_LINKS"] = settings["wheelhouse"]
    env.update(job["env"])
    return env


def bwrap_argv(job: dict, settings: dict) -> list:
    """bwrap's whole command line for this job."""
    args = [settings["bwrap"], "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--disable-userns", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            *system_binds(), "--proc", "/proc", "--dev", "/dev", "--ro-bind", "/sys", "/sys",
            "--tmpfs", "/tmp", "--tmpfs", "/var/tmp", "--tmpfs", "/run", "--tmpfs", "/dev/shm", "--dir", HOME]
    for node in gpu_nodes(job["gpus"]):
        args += ["--dev-bind", node, node]
    if settings.get("wheelhouse"):
        args += ["--ro-bind", settings["wheelhouse"], settings["wheelhouse"]]
    for path in job["ro"]:
        args += ["--ro-bind", str(path), str(path)]
    for path in job["rw"]:
        args += ["--bind", str(path), str(path)]
    if job["machine"]:  # writable: asv rewrites its machine file as it starts (a job path, never the runner's)
        args += ["--bind", str(job["machine"]), f"{HOME}/.asv-machine.json"]
    args += ["--clearenv"]
    for name, value in sorted(environment(job, settings).items()):
        args += ["--setenv", name, value]
    args += ["--chdir", job["cwd"] or HOME, "--", *job["command"]]
    return args


class JobCgroup:
    """A cgroup v2 of this job's own below the delegated one: limits set before the job enters it, killed whole."""

    def __init__(self, parent: str, memory_max: str, pids_max: str):
        parent_path = Path(parent)
        controllers = set((parent_path / "cgroup.controllers").read_text().split()) \
            if (parent_path / "cgroup.controllers").is_file() else None
        if controllers is None:
            raise Refused(f"{parent} is no cgroup v2 folder: delegate one to the runner's service (Delegate=yes)")
        if not {"memory", "pids"} <= controllers:
            raise Refused(f"the cgroup {parent} offers {' '.join(sorted(controllers)) or 'no controller'}, not "
                          "memory and pids: the job's limits cannot be set")
        self.path = parent_path / f"sgemm-job-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            subtree = (parent_path / "cgroup.subtree_control").read_text().split()
            if not {"memory", "pids"} <= set(subtree):  # a parent holding no process can hand both on
                (parent_path / "cgroup.subtree_control").write_text("+memory +pids\n")
            self.path.mkdir()
            for name, value in (("memory.max", memory_max), ("pids.max", pids_max), ("memory.swap.max", "0")):
                if name != "memory.swap.max" or (self.path / name).exists():
                    (self.path / name).write_text(f"{value}\n")
            self.check_limits(memory_max, pids_max)
        except OSError as exc:
            self.remove()
            raise Refused(f"cannot make the job's cgroup under {parent} ({exc.strerror}): is it delegated to this "
                          "user?")

    def check_limits(self, memory_max: str, pids_max: str) -> None:
        for name, value in (("memory.max", memory_max), ("pids.max", pids_max)):
            if (self.path / name).read_text().strip() != str(value):
                raise OSError(0, f"{name} did not take {value}")

    def enter(self) -> None:
        """Called in the child before it becomes bwrap: everything the job starts stays in here."""
        (self.path / "cgroup.procs").write_text(f"{os.getpid()}\n")

    def events(self, name: str) -> dict:
        try:
            lines = (self.path / name).read_text().split("\n")
        except OSError:
            return {}
        return {key: int(value) for key, value in (line.split() for line in lines if line.strip())}

    def kill(self) -> bool:
        """Every process in the cgroup ended at once; whether it is empty after."""
        try:
            (self.path / "cgroup.kill").write_text("1\n")
        except OSError:
            pass
        deadline = time.monotonic() + KILL_WAIT_S
        while self.events("cgroup.events").get("populated", 0) and time.monotonic() < deadline:
            time.sleep(0.05)
        return not self.events("cgroup.events").get("populated", 0)

    def remove(self) -> bool:
        try:
            self.path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            return False


def run(job: dict, settings: dict, cgroup) -> int:
    argv = bwrap_argv(job, settings)
    ending = {"signal": None, "process": None}

    def on_signal(number, _frame):
        # bwrap killed takes the namespace's first process with it (--die-with-parent), and that one every other.
        ending["signal"] = number
        if ending["process"] is not None:
            ending["process"].kill()
        cgroup.kill()

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, on_signal)
    print(f"job-sandbox: {' '.join(job['command'])[:200]} in bubblewrap, cgroup {cgroup.path}", file=sys.stderr,
          flush=True)
    try:
        process = ending["process"] = subprocess.Popen(argv, preexec_fn=cgroup.enter)  # noqa: PLW1509 - its cgroup
    except (OSError, subprocess.SubprocessError) as exc:
        cgroup.remove()
        print(f"::error::job-sandbox: cannot start bubblewrap: {exc}", flush=True)
        return 2
    while True:
        try:
            status = process.wait()
            break
        except InterruptedError:
            continue
    emptied = cgroup.kill()
    problems = []
    if cgroup.events("memory.events").get("oom_kill", 0):
        problems.append(f"the job ran out of memory (memory.max {settings['memory_max']}; a full /tmp counts)")
    if cgroup.events("pids.events").get("max", 0):
        problems.append(f"the job reached pids.max {settings['pids_max']}")
    if not emptied or not cgroup.remove():
        problems.append(f"the cgroup {cgroup.path} could not be emptied and removed")
    if ending["signal"]:
        problems.append(f"the launcher got signal {ending['signal']}: the job was ended")
    for problem in problems:
        print(f"::error::job-sandbox: {problem}", flush=True)
    if problems:
        return 3
    return status if status >= 0 else 128 - status


def main(argv: list, settings_path: Path = SETTINGS, cgroup_type=JobCgroup) -> int:
    try:
        settings = load_settings(settings_path)
        job = parse(argv, settings)
        bwrap_version(settings["bwrap"])
        check_user_namespaces(settings["bwrap"])
        cgroup = cgroup_type(settings["cgroup"], str(settings["memory_max"]), str(settings["pids_max"]))
    except Refused as exc:
        return refuse(str(exc))
    return run(job, settings, cgroup)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
