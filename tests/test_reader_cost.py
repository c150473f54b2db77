"""scripts/reader-cost.py: readers forked over filed cases, each timed; what it prints, and bad input."""

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "reader-cost.py"


def test_it_times_a_reader_of_each_case():
    done = subprocess.run([sys.executable, str(SCRIPT), "--repeats", "1"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"a reader's own work: median [\d.]+ ms, largest [\d.]+ ms, over 3 readers of 3 cases\n",
                        done.stdout)


def test_no_readers_is_refused():
    done = subprocess.run([sys.executable, str(SCRIPT), "--repeats", "0"], capture_output=True, text=True)
    assert done.returncode == 2 and "--repeats must be at least 1" in done.stderr and "Traceback" not in done.stderr
