# Sourced by the lab scripts that time catalogue entries not in the catalogue (run from the repository root on a GPU
# box, .whl carried): installs the offline wheelhouse into /tmp/site, points sgemm at CUDA's Python packages, writes
# the GPU's state and the checkout to $OUT/summary.txt, copies the checkout to $SCRATCH with the given entries files
# appended to its catalogue, and enters it, PYTHONPATH on the copy. $CHECKOUT keeps the checkout's path.
# Usage: OUT=... SCRATCH=... source lab/scratch-with-entries.sh ENTRIES.toml [ENTRIES.toml ...]
mkdir -p "$OUT"
ls .whl/*.whl | grep -v -e numpy- -e nvidia_ml_py- | xargs python3 -m pip install -q --no-index --no-deps \
    --no-compile --target /tmp/site 2>/dev/null
site=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export SGEMM_CUDA_SITE="$site:/tmp/site" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv \
    | tee -a "$OUT/summary.txt"
echo "checkout: $(git rev-parse --short HEAD) $(git status --porcelain | wc -l) changed files" | tee -a "$OUT/summary.txt"
CHECKOUT=$PWD
rm -rf "$SCRATCH" && mkdir -p "$SCRATCH"
cp -r sgemm kernels benchmarks tests tools pyproject.toml asv.conf.json "$SCRATCH/"
cat "$@" >> "$SCRATCH/sgemm/catalogue.toml"
cd "$SCRATCH" || exit 1
export PYTHONPATH="$SCRATCH:/tmp/site"
