#!/usr/bin/env python3
"""What each of a history commit's reader processes costs in its own work, on this machine, without a GPU.

asv starts one process per track and case (about 3,000 a commit); the first measures every case and files its
figures, the others only read them (sgemm.measuring.record). This forks readers as asv's forkserver does, from a
parent that has imported what the suite imports, over cases whose round is already filed, and times what each child
does: bind the case (`asv_case`) and read one figure. asv's own cost per process (the fork, its request and result
files) comes on top and is not measured here.

Usage: scripts/reader-cost.py [--repeats 20]. Prints the median and the largest time of the readers.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sgemm.catalogue import get_kernel, load_catalogue  # noqa: E402
from sgemm.measuring import record  # noqa: E402

CASES = [("fp32/warptile", 4096), ("fp16/wgmma_grouped_tma_store", 8192), ("fp32/naive", 1024)]
SAMPLES = 1000  # about what NVBench records of a case


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20, help="readers of each case")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    load_catalogue()
    run_dir = tempfile.mkdtemp(prefix="reader-cost-")
    for name, size in CASES:
        case = record.AsvCase(run_dir, get_kernel(name), size, size, size)
        case.dir.mkdir(parents=True, exist_ok=True)
        record.CaseResult(samples_s=[1e-3] * SAMPLES, sm_clock_mhz=[1980.0] * SAMPLES, kernel=name, m=size, n=size,
                          k=size, gpu="none", relative_error=1e-6).save(case.dir / "round-1.json")
    times = []
    for _ in range(args.repeats):
        for name, size in CASES:
            read_end, write_end = os.pipe()
            child = os.fork()
            if child == 0:
                started = time.perf_counter()
                case = record.asv_case(run_dir, name, size, size, size)
                (case.dir / "calls.json").unlink(missing_ok=True)  # each reader reads round 1
                case.result("track_time")
                os.write(write_end, repr(time.perf_counter() - started).encode())
                os._exit(0)
            os.waitpid(child, 0)
            times.append(float(os.read(read_end, 64)))
            os.close(read_end)
            os.close(write_end)
    times.sort()
    print(f"a reader's own work: median {times[len(times) // 2] * 1e3:.1f} ms, largest {times[-1] * 1e3:.1f} ms, "
          f"over {len(times)} readers of {len(CASES)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
