"""An `asv run` shown in a few lines: asv's whole output goes to a log file, and the terminal gets where the run
stands (percent done, which commit, time spent and an estimate of what is left), one line a step or, on a terminal,
one line rewritten in place. asv prints a table per benchmark (thousands of lines a commit); a reader needs to know
that it moves, how far it is, and where the details are.

asv's lines read here: "· Running 3025 total benchmarks (1 commits * 1 environments * 3025 benchmarks)",
"[ 12.50%] · For sgemm commit 1a2b3c4d <main>:", and "[ 12.52%] ··· bench.Class.method   failed".

asv says nothing while the resource suite compiles every kernel (its setup_cache, a minute or more a commit); the
compile writes how far it is to a file of its own (sgemm.measuring.resources.PROGRESS_VARIABLE), read here too. So
does the process that measures every case (sgemm.measuring.record.MEASURING_PROGRESS_VARIABLE): the estimate of the
time left is sgemm.history.estimate's, from both, never asv's percent alone (which counts benchmark processes).
Every line off a terminal says the time since the history began and the estimate, so that a log can be scored
against when the run really ended (tools/acceptance/estimate_error.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from .estimate import RunClock

PERCENT = re.compile(r"^\[\s*(\d+(?:\.\d+)?)%\]")
COMMIT = re.compile(r"· For \S+ commit ([0-9a-f]{7,40})")
TOTAL = re.compile(r"Running (\d+) total benchmarks \((\d+) commits")
FAILED = re.compile(r"^\[\s*[\d.]+%\] ·+ (\S+)\s+failed\s*$")
STEP_PERCENT = 10  # off a terminal: a line each time the run passes another STEP_PERCENT
QUIET_S = 60  # and a line when asv said nothing for this long (a compile of every kernel says nothing for a minute)
REDRAW_S = 0.5  # on a terminal, the line is rewritten at most this often
POLL_S = 2.0  # how often the compile's progress file is read while asv is silent
END_GRACE_S = 10.0  # after Ctrl-C, how long asv is given to end at each signal before a stronger one
COMPILE_LINE_S = 15  # off a terminal, a line for the compile's progress at most this often (a line a batch, where
# batches take longer: a few on a 2-core box, one on a box with many cores)


@dataclass
class RunState:
    """What asv's output said so far."""

    percent: float = 0.0
    commits: int = 0  # in the run, from asv's first count
    commit: str = ""
    commit_number: int = 0
    benchmarks: int = 0
    failed: list[str] = field(default_factory=list)
    compile: dict | None = None  # the resource compile's newest record, while it runs

    def read(self, line: str) -> None:
        if found := TOTAL.search(line):
            self.benchmarks, self.commits = int(found.group(1)), int(found.group(2))
        if found := PERCENT.match(line):
            self.percent = float(found.group(1))
            self.compile = None  # asv moved on: the compile, if one ran, is over
        if found := COMMIT.search(line):
            self.commit, self.commit_number = found.group(1)[:8], self.commit_number + 1
        if found := FAILED.match(line):
            self.failed.append(found.group(1))

    def read_compile(self, line: str) -> bool:
        """A line of the compile's progress file; whether it was one (a line cut short as it is written is not)."""
        try:
            record = json.loads(line)
            done, total, seconds = int(record["done"]), int(record["total"]), float(record["seconds"])
        except (ValueError, KeyError, TypeError):
            return False
        self.compile = {"done": done, "total": total, "seconds": seconds, "last": str(record.get("last", ""))}
        return True

    def line(self, elapsed_s: float, left_s: float | None = None) -> str:
        """Where the run stands; `left_s`, the estimate of the time left (else asv's percent is extrapolated)."""
        where = f"commit {self.commit_number} of {self.commits} ({self.commit})" if self.commit else "starting"
        text = f"asv: {self.percent:3.0f}% · {where} · "
        if self.compile:
            done, total, seconds = self.compile["done"], self.compile["total"], self.compile["seconds"]
            if done >= total:
                text += f"compiled every kernel for the resource suite ({total} programs) in {_minutes(seconds)}"
            else:
                text += f"compiling every kernel for the resource suite: {done} of {total} programs"
                if done:
                    text += f" (last {self.compile['last']}), about {_minutes(seconds * (total - done) / done)} left"
            return text + f" · {_minutes(elapsed_s)} so far" + (f", about {_minutes(left_s)} left"
                                                                 if left_s is not None else "")
        text += f"{_minutes(elapsed_s)} so far"
        if left_s is not None:
            text += f", about {_minutes(left_s)} left"
        elif 1 <= self.percent < 100:
            text += f", about {_minutes(elapsed_s * (100 - self.percent) / self.percent)} left"
        return text + (f" · {len(self.failed)} failed" if self.failed else "")


def minutes(seconds: float) -> str:
    """Seconds as a reader takes them in: "45 s", "3.5 min"."""
    return _minutes(seconds)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


PART_NAMES = {"environment": "environment (virtualenv and requirements)",
              "discovery": "build and discovery", "benchmarks": "benchmarks"}


def describe_parts(parts: dict[str, float]) -> str:
    """How long each part of an asv run took, in words (sgemm.history.estimate.RunClock.parts)."""
    return ", ".join(f"{PART_NAMES[name]} {seconds:.0f} s" for name, seconds in parts.items()) or "no part seen"


class Tail:
    """The lines added to a file since the last read (none while it does not exist); a last line without its
    newline waits for the next read."""

    def __init__(self, path: Path | None):
        self.path, self.offset = path, 0

    def lines(self) -> list[str]:
        if self.path is None:
            return []
        try:
            with open(self.path, "rb") as source:
                source.seek(self.offset)
                data = source.read()
        except OSError:
            return []
        whole = data[:data.rfind(b"\n") + 1]
        self.offset += len(whole)
        return whole.decode(errors="replace").splitlines()


def end_group(process: subprocess.Popen, grace_s: float = END_GRACE_S) -> None:
    """End `process`, started as the leader of a process group of its own, and every process of that group: SIGINT
    first, as Ctrl-C would have sent it (asv then stops its benchmark processes itself), then SIGTERM, then SIGKILL,
    each given `grace_s` to work."""
    for signal_number in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, signal_number)
        except ProcessLookupError:  # the group is gone
            return
        try:
            process.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def _ended_on_interrupt(process: subprocess.Popen, terminal: TextIO | None) -> Iterator[None]:
    """On Ctrl-C inside, `process`'s group is ended (end_group) and the line rewritten in place on `terminal` is
    closed before the interrupt goes on."""
    try:
        yield
    except KeyboardInterrupt:
        end_group(process)
        if terminal:
            terminal.write("\n")
        raise


def follow_asv(command: list[str], log_path: Path, out: TextIO = sys.stderr, cwd: Path | None = None,
               env: dict | None = None, now=time.monotonic, compile_progress: Path | None = None,
               measuring_progress: Path | None = None, clock: RunClock | None = None, began: float | None = None,
               after_s: float = 0.0) -> tuple[int, RunState]:
    """Run `command` (an `asv run`), its output into `log_path`, its progress onto `out`; asv's exit status and
    what its output said. `compile_progress` and `measuring_progress`: the files the resource compile and the
    measuring report to (see the module's doc); `clock` makes the estimate (sgemm.history.estimate), to which
    `after_s` is added for what follows the run; `began`: when the history began (on `now`'s clock)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    state = RunState()
    live = out.isatty()
    started = last_shown = now()
    began = started if began is None else began
    shown_step, shown_commit = -1, 0
    compile_lines, measuring_lines = Tail(compile_progress), Tail(measuring_progress)
    print(f"asv: its full output goes to {log_path}", file=out)
    # asv runs in a process group of its own: Ctrl-C reaches this process alone, which ends asv's group once (a
    # second SIGINT would cut asv's own cleanup short), and a SIGINT sent to this process alone ends asv too.
    with open(log_path, "w") as log, subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                                      stderr=subprocess.STDOUT, process_group=0) as process, \
            _ended_on_interrupt(process, out if live else None):
        watch = selectors.DefaultSelector()
        watch.register(process.stdout, selectors.EVENT_READ)
        pending, ended = b"", False
        while not ended:
            # The pipe is read as bytes come (a buffered reader would keep lines that select cannot see, and show
            # them only when asv next says something: during the compile, a minute later).
            chunk = os.read(process.stdout.fileno(), 65536) if watch.select(timeout=POLL_S) else None
            ended = chunk == b""
            if chunk:
                pending += chunk
            whole = len(pending) if ended else pending.rfind(b"\n") + 1  # a line cut short waits for its end
            lines, pending = pending[:whole], pending[whole:]
            moment = now()
            for line in lines.decode(errors="replace").splitlines(keepends=True):
                log.write(line)
                state.read(line)
                if clock:
                    clock.read(line, moment)
            log.flush()
            compiled = sum(state.read_compile(text) for text in compile_lines.lines())
            measured = sum(bool(clock and clock.read_measuring(text, moment)) for text in measuring_lines.lines())
            step, elapsed = int(state.percent // STEP_PERCENT), now() - began
            left = clock.left(now()) + after_s if clock else None
            if live and now() - last_shown >= REDRAW_S:
                out.write("\r\033[K" + state.line(elapsed, left))
                out.flush()
                last_shown = now()
            elif not live and (step > shown_step or state.commit_number > shown_commit
                               or ((compiled or measured) and now() - last_shown >= COMPILE_LINE_S)
                               or now() - last_shown >= QUIET_S):
                print(state.line(elapsed, left), file=out, flush=True)
                shown_step, shown_commit, last_shown = max(step, shown_step), state.commit_number, now()
        status = process.wait()
    if live:
        out.write("\n")
    summary = f"asv run: exit {status} after {_minutes(now() - started)}, {state.benchmarks} benchmarks"
    if clock:
        summary += f" ({describe_parts(clock.parts(now()))})"
    if state.failed:
        summary += f"; failed: {', '.join(sorted(set(state.failed))[:5])}" + (
            f" and {len(set(state.failed)) - 5} more" if len(set(state.failed)) > 5 else "")
    print(f"{summary}; details in {log_path}", file=out, flush=True)
    return status, state
