#!/usr/bin/env bash
# scripts/bench/device.py on a lent GPU machine that has JAX with CUDA but no
# network and none of gymnax, gymnasium (BENCHMARKS.md, "Device benchmark").
#
#   here, with network, once:  bash scripts/bench/device_run.sh fetch
#       downloads the wheels the machine lacks into .whl/ (git-ignored)
#   there, from the repository root, with .whl carried and $OUT set:
#       bash scripts/bench/device_run.sh [device.py options]
#       installs the wheels into /tmp/site and runs the full benchmark under a
#       timeout, writing $OUT/device/{rows.jsonl,summary.json,table.md,scaling.png}
#       and $OUT/log.txt, $OUT/nvidia-smi.csv (6 files: what comes back is at most 8)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

# what plume_jax imports that the machine's image does not have (pinned as in
# constraints.txt; gymnax's and gymnasium's other needs are in the image)
WHEELS=(gymnax==1.0.1 gymnasium==1.3.0 farama-notifications==0.0.6)

if [ "${1:-}" = fetch ]; then
    exec python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl "${WHEELS[@]}"
fi

: "${OUT:?set OUT to the folder the results go to}"
ls .whl/*.whl > /dev/null 2>&1 || { echo "no .whl/*.whl: run 'bash scripts/bench/device_run.sh fetch' here and carry .whl" >&2; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="$PWD:/tmp/site" PYTHONUNBUFFERED=1
# room for the largest batches; JAX's default preallocation stays on
export XLA_PYTHON_CLIENT_MEM_FRACTION="${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.9}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/nvidia-smi.csv" 2>&1

# the run plans to end inside its budget (--budget-s, 440 s by default); the timeout
# only guards against a hang, and what was measured before it stays in rows.jsonl
timeout -k 10 "${DEVICE_TIMEOUT_S:-540}" python3 scripts/bench/device.py \
    --out "$OUT/device" --overwrite "$@" 2>&1 | tee "$OUT/log.txt"
rc=${PIPESTATUS[0]}
if [ -f "$OUT/device/rows.jsonl" ] && [ ! -f "$OUT/device/summary.json" ]; then
    python3 scripts/bench/device.py --render-only --out "$OUT/device" --compare 2>&1 \
        | tee -a "$OUT/log.txt"
fi
exit "$rc"
