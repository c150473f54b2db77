#!/usr/bin/env bash
# Does the gate catch a real slowdown on this GPU box, and stay quiet on a change that cannot slow anything?
# In a scratch clone of HEAD, commit B gives fp32/naive 16x16 thread blocks instead of 32x32 (a few percent slower
# on an H100), and commit C on top of it changes documentation only. Expected: `sgemm gate HEAD B` exits 1 naming
# fp32/naive alone, and `sgemm gate B C` exits 0, three times in a row. Prints each run's exit status and wall time;
# the reports and logs land in OUTPUT_DIR. Needs what `sgemm gate` needs (SGEMM_CUDA_SITE; offline, PIP_NO_INDEX and
# PIP_FIND_LINKS). Exit 0 when every run ended as expected.
# Usage: scripts/gate-selftest.sh [OUTPUT_DIR]      (default ./gate-selftest)
#   SELFTEST_SLOWER=0   skip the slowdown run;  SELFTEST_DOCS_RUNS=N   documentation-only runs (default 3)
#   SELFTEST_GATE_ARGS="--size 1024 --size 2048"   more arguments for every `sgemm gate` (word-split)
set -uo pipefail
out=$(realpath -m "${1:-gate-selftest}")
mkdir -p "$out"
scratch=$(mktemp -d)/clone
git clone -q "$(cd "$(dirname "$0")/.." && pwd)" "$scratch" && cd "$scratch" || exit 2
git config user.name "gate self-test" && git config user.email "gate-selftest@localhost"
base=$(git rev-parse HEAD)
python3 - <<'PY' || exit 2
import pathlib

catalogue = pathlib.Path("sgemm/catalogue.toml")
text = catalogue.read_text()
before = 'entry = "gemm_naive<32, 32, 1>"\nblock_threads = [32, 32]\nblock_tile = [32, 32]'
after = 'entry = "gemm_naive<16, 16, 1>"\nblock_threads = [16, 16]\nblock_tile = [16, 16]'
assert text.count(before) == 1, "fp32/naive's entry is not the one this self-test edits"
catalogue.write_text(text.replace(before, after))
PY
git commit -qam "fp32/naive: 16x16 thread blocks" && slower=$(git rev-parse HEAD)
echo "Gate self-test: a documentation-only change." >> README.md
git commit -qam "README: one more line" && docs=$(git rev-parse HEAD)

failures=0
gate() {  # name, expected exit status, base, head
    local name=$1 expected=$2 status
    git checkout -q "$4"
    SECONDS=0
    # shellcheck disable=SC2086  # word-split on purpose: several arguments in one variable
    python3 -m sgemm gate "$3" "$4" ${SELFTEST_GATE_ARGS:-} --report "$out/$name.md" > /dev/null 2> "$out/$name.log"
    status=$?
    echo "$name: exit $status (expected $expected), ${SECONDS} s, $(grep -c '^| .* | [A-Z*]* | ' "$out/$name.md") cases"
    # Every case whose verdict is not SAME (its name and verdict)
    grep -E '\*\*(REGRESSION|AMBIGUOUS|IMPROVEMENT|ERROR)\*\*' "$out/$name.md" | cut -d'|' -f2,8 | sed 's/^/    /'
    [ "$status" = "$expected" ] || failures=$((failures + 1))
}
[ "${SELFTEST_SLOWER:-1}" = 0 ] || gate slower 1 "$base" "$slower"
for round in $(seq "${SELFTEST_DOCS_RUNS:-3}"); do
    gate "docs-$round" 0 "$slower" "$docs"
done
exit $((failures > 0))
