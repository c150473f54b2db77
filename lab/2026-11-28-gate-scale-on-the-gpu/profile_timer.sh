#!/usr/bin/env bash
# Where a paired round's host time goes: one timer_bias process per case under cProfile (card 0 and 1 at once), and
# how long the NVML readings the timer takes per block last on this card (card 2). Output under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
profile() {  # CARD KERNEL SIZE NAME
    CUDA_VISIBLE_DEVICES=$1 python3 -m cProfile -o /tmp/$4.prof -m tools.acceptance.timer_bias --one $2 $3 \
        > "$OUT/$4.json" 2>&1
    python3 -c "import pstats; pstats.Stats('/tmp/$4.prof').sort_stats('tottime').print_stats(30)" \
        | tail -n 45 > "$OUT/$4.txt"
}
profile 0 fp16/wgmma_grouped_tma_store 8192 hopper &
profile 1 fp32/warptile 4096 warptile &
CUDA_VISIBLE_DEVICES=2 python3 - > "$OUT/nvml.txt" 2>&1 <<'PY' &
import time
from sgemm.measuring.telemetry import CardReadings
import cupy
cupy.cuda.Device(0).use()
readings = CardReadings.of(0)
for name, read in (("sm clock", readings.sm_clock_mhz), ("energy", readings.energy_mj)):
    started = time.perf_counter()
    for _ in range(200):
        read()
    print(f"{name}: {(time.perf_counter() - started) / 200 * 1e3:.3f} ms a reading (idle card)")
a = cupy.ones((8192, 8192), dtype=cupy.float16)
for _ in range(3):
    started = time.perf_counter()
    for _ in range(50):
        a @ a
        readings.sm_clock_mhz(); readings.energy_mj()
    cupy.cuda.Device().synchronize()
    print(f"busy card: {(time.perf_counter() - started) / 50 * 1e3:.3f} ms a GEMM + both readings")
ev = [cupy.cuda.Event() for _ in range(2)]
started = time.perf_counter()
for _ in range(1000):
    e = cupy.cuda.Event(); e.record()
print(f"event create+record: {(time.perf_counter() - started) / 1000 * 1e6:.1f} us")
buf = cupy.empty(2 * cupy.cuda.Device().attributes["L2CacheSize"], dtype=cupy.uint8)
started = time.perf_counter()
for i in range(1000):
    buf.fill(i % 251)
print(f"flush fill (host side): {(time.perf_counter() - started) / 1000 * 1e6:.1f} us")
PY
wait
tail -n 3 "$OUT"/*.json; cat "$OUT/nvml.txt"; head -n 40 "$OUT/hopper.txt"
