"""One-off, 2026-11-28: the round-to-round sd of each paired case measured on the H100 under the present rounds (±0.2%
or 12 s a case), by size, for tools/simulate/simulate_gates.py. Writes measured-sds.json beside this file.

- 4096: every entry of noise/nvidia-h100-80gb-hbm3.json's paired section (three whole A/A gates of every kernel,
  lab/2026-11-27-gate-selftest), its sd and degrees of freedom as learned.
- 8192, and below 4096 (the squares at 1000, 1024 and 2048 and the shape sweep, together): the shipped file has no entry there, so each case row of the 2026-11-27 gate reports
  (lab/2026-11-27-gate-selftest/*.md) at a size other than 4096 was judged on its own rounds alone, and the report
  printed its detectable effect. That figure was, on the day, expm1((t(1 - a/2, n - 1) + t(0.8, n - 1)) * sd / sqrt(n))
  with a = alpha_look / m (m: the report's timed cases; alpha_look = 0.05 * (n - before) / 9). Solved for sd here,
  with before = 0 for a case decided at the first look (3 rounds) and before = 3 otherwise (a case left open at three
  rounds asked for the rounds it needed at once). The printed figure has two decimals of a percent: a case printed
  as 0.02% is known to within a quarter.

Run from the repository root: python lab/2026-11-28-gate-simulation/derive_sds.py
"""

import json
import math
import re
from pathlib import Path

from scipy import stats

ROOT = Path(__file__).resolve().parents[2]
REPORTS = sorted((ROOT / "lab" / "2026-11-27-gate-selftest").glob("*.md"))
ROW = re.compile(r"^\| (?P<label>[a-z0-9]+/[a-z0-9_]+ (?P<shape>\d+x\d+x\d+)(?: \(shape sweep\))?) \|(?P<cells>.*)$")


def sd_from_detectable(detectable: float, rounds: int, family: int) -> float:
    before = 0 if rounds <= 3 else 3
    alpha = 0.05 * (rounds - before) / 9 / family
    df = rounds - 1
    return math.log1p(detectable) * math.sqrt(rounds) / (stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(0.8, df))


def report_rows(path: Path):
    """Each gate report's timed rows (label, shape, detectable, rounds), with the report's number of timed cases."""
    for section in path.read_text().split("## GEMM gate:")[1:]:
        rows = []
        for line in section.splitlines():
            match = ROW.match(line)
            if not match:
                continue
            cells = [cell.strip() for cell in match["cells"].split("|")]
            if cells[6] and int(cells[6]) > 0:
                rows.append((match["label"], match["shape"], float(cells[5].rstrip("%")) / 100, int(cells[6])))
        for row in rows:
            yield (*row, len(rows))


def main() -> None:
    shipped = json.loads((ROOT / "noise" / "nvidia-h100-80gb-hbm3.json").read_text())["paired"]
    sizes = {"4096": [{"case": label, "sd": entry["sd"], "df": entry["df"],
                       "from": "noise/nvidia-h100-80gb-hbm3.json"} for label, entry in sorted(shipped.items())]}
    for path in REPORTS:
        for label, shape, detectable, rounds, family in report_rows(path):
            m, n, k = (int(part) for part in shape.split("x"))
            if (m, n, k) == (4096, 4096, 4096):
                continue
            size = "8192" if m == n == k == 8192 else "below 4096"  # the squares at 1000-2048 and the sweep
            sizes.setdefault(size, []).append({
                "case": label, "sd": round(sd_from_detectable(detectable, rounds, family), 7), "df": rounds - 1,
                "from": f"lab/2026-11-27-gate-selftest/{path.name}: detectable {detectable:.2%} after {rounds} rounds "
                        f"of {family} timed cases"})
    out = Path(__file__).with_name("measured-sds.json")
    out.write_text(json.dumps({"machine": "nvidia-h100-80gb-hbm3", "rounds": "±0.2% or 12 s a case, L2 warm",
                               "sizes": sizes}, indent=1) + "\n")
    for size, entries in sizes.items():
        sds = sorted(entry["sd"] for entry in entries)
        print(f"{size}: {len(sds)} cases, sd median {sds[len(sds) // 2]:.4%}, {sds[0]:.4%}-{sds[-1]:.4%}")


if __name__ == "__main__":
    main()
