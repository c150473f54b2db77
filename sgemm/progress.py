"""An `asv run` shown in a few lines: asv's whole output goes to a log file, and the terminal gets where the run
stands (percent done, which commit, time spent and an estimate of what is left), one line a step or, on a terminal,
one line rewritten in place. asv prints a table per benchmark (thousands of lines a commit); a reader needs to know
that it moves, how far it is, and where the details are.

asv's lines read here: "· Running 3025 total benchmarks (1 commits * 1 environments * 3025 benchmarks)",
"[ 12.50%] · For sgemm commit 1a2b3c4d <main>:", and "[ 12.52%] ··· bench.Class.method   failed".
"""

from __future__ import annotations

import re
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

PERCENT = re.compile(r"^\[\s*(\d+(?:\.\d+)?)%\]")
COMMIT = re.compile(r"· For \S+ commit ([0-9a-f]{7,40})")
TOTAL = re.compile(r"Running (\d+) total benchmarks \((\d+) commits")
FAILED = re.compile(r"^\[\s*[\d.]+%\] ·+ (\S+)\s+failed\s*$")
STEP_PERCENT = 10  # off a terminal: a line each time the run passes another STEP_PERCENT
QUIET_S = 60  # and a line when asv said nothing for this long (a compile of every kernel says nothing for a minute)
REDRAW_S = 0.5  # on a terminal, the line is rewritten at most this often


@dataclass
class RunState:
    """What asv's output said so far."""

    percent: float = 0.0
    commits: int = 0  # in the run, from asv's first count
    commit: str = ""
    commit_number: int = 0
    benchmarks: int = 0
    failed: list[str] = field(default_factory=list)

    def read(self, line: str) -> None:
        if found := TOTAL.search(line):
            self.benchmarks, self.commits = int(found.group(1)), int(found.group(2))
        if found := PERCENT.match(line):
            self.percent = float(found.group(1))
        if found := COMMIT.search(line):
            self.commit, self.commit_number = found.group(1)[:8], self.commit_number + 1
        if found := FAILED.match(line):
            self.failed.append(found.group(1))

    def line(self, elapsed_s: float) -> str:
        where = f"commit {self.commit_number} of {self.commits} ({self.commit})" if self.commit else "starting"
        text = f"asv: {self.percent:3.0f}% · {where} · {_minutes(elapsed_s)} so far"
        if 1 <= self.percent < 100:
            text += f", about {_minutes(elapsed_s * (100 - self.percent) / self.percent)} left"
        return text + (f" · {len(self.failed)} failed" if self.failed else "")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def follow_asv(command: list[str], log_path: Path, out: TextIO = sys.stderr, cwd: Path | None = None,
               env: dict | None = None, now=time.monotonic) -> tuple[int, RunState]:
    """Run `command` (an `asv run`), its output into `log_path`, its progress onto `out`; asv's exit status and
    what its output said."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    state = RunState()
    live = out.isatty()
    started = last_shown = now()
    shown_step = -1
    print(f"asv: its full output goes to {log_path}", file=out)
    with open(log_path, "w") as log, subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                                      stderr=subprocess.STDOUT, text=True, bufsize=1) as process:
        watch = selectors.DefaultSelector()
        watch.register(process.stdout, selectors.EVENT_READ)
        while True:
            line = process.stdout.readline() if watch.select(timeout=QUIET_S) else None
            if line == "":
                break
            if line is not None:
                log.write(line)
                log.flush()
                state.read(line)
            step, elapsed = int(state.percent // STEP_PERCENT), now() - started
            if live and now() - last_shown >= REDRAW_S:
                out.write("\r\033[K" + state.line(elapsed))
                out.flush()
                last_shown = now()
            elif not live and (step > shown_step or now() - last_shown >= QUIET_S):
                print(state.line(elapsed), file=out, flush=True)
                shown_step, last_shown = max(step, shown_step), now()
        status = process.wait()
    if live:
        out.write("\n")
    summary = f"asv run: exit {status} after {_minutes(now() - started)}, {state.benchmarks} benchmarks"
    if state.failed:
        summary += f"; failed: {', '.join(sorted(set(state.failed))[:5])}" + (
            f" and {len(set(state.failed)) - 5} more" if len(set(state.failed)) > 5 else "")
    print(f"{summary}; details in {log_path}", file=out, flush=True)
    return status, state
