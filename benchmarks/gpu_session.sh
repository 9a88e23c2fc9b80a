#!/usr/bin/env bash
# Everything a session with a GPU does, in one call (at most 10 minutes: the steps' limits add up
# to that):
#   1. the GPU, driver, CUDA and torch versions;
#   2. the unit tests on CUDA (pytest tests/unit --device cuda);
#   3. the GPU benchmark (python -m benchmarks --gpu --out $OUT --budget-s 240), then the
#      Triton kernel's rows (python -m benchmarks --triton --out $OUT --budget-s 70:
#      attention.flash_triton against SDPA's flash backend and tiled_attention);
#   4. pages 17 (performance), 18 (memory-efficient), 21 (the Triton kernel) and 13 (KV cache)
#      run on the GPU, their output and figures saved under $OUT/pages.
# Everything lands in $OUT (default: ./gpu-session-<date>); the log is $OUT/session.log.
#
#   bash benchmarks/gpu_session.sh            on a machine with a GPU
#   bash benchmarks/gpu_session.sh --quick    a dry run on the CPU: the same steps, tiny sizes
set -uo pipefail
cd "$(dirname "$0")/.."

quick=0
[ "${1:-}" = "--quick" ] && quick=1
OUT=${OUT:-gpu-session-$(date -u +%Y-%m-%d)}
mkdir -p "$OUT"
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
exec > >(tee "$OUT/session.log") 2>&1

# Time limits per step; the dry run on a (slower, maybe shared) CPU gets more room.
if [ $quick = 1 ]; then device=cpu; limit=4; else device=cuda; limit=1; fi
status=0
step() { echo; echo "== $* ($(date -u +%H:%M:%S) UTC)"; }

step "1. versions"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null \
    || echo "nvidia-smi: not found"
$PY - <<'EOF'
import torch
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
print(f"CUDA available: {torch.cuda.is_available()}")
if torch.cuda.is_available():
    print(f"device: {torch.cuda.get_device_name()}, capability {torch.cuda.get_device_capability()}")
EOF

step "2. unit tests on $device"
unit_args=(tests/unit --device "$device" -q -p no:cacheprovider --junitxml "$OUT/unit-$device.xml")
[ $quick = 1 ] && unit_args+=(-x -k "masks or functional")
timeout $((100 * limit)) $PY -m pytest "${unit_args[@]}" || status=1

step "3. benchmarks"
if [ $quick = 1 ]; then
    timeout $((120 * limit)) $PY -m benchmarks --gpu --quick --out "$OUT" || status=1
else
    timeout 260 $PY -m benchmarks --gpu --out "$OUT" --budget-s 240 || status=1
fi

step "3b. the Triton kernel against SDPA's flash backend and tiled_attention"
if [ $quick = 1 ]; then  # in Triton's interpreter, at tiny sizes
    timeout $((60 * limit)) $PY -m benchmarks --triton --quick --out "$OUT" || status=1
else
    timeout 90 $PY -m benchmarks --triton --out "$OUT" --budget-s 70 || status=1
fi

step "4. pages on $device"
pages=(17_performance 18_memory_efficient 21_flash_triton 13_kv_cache_gqa)  # found in any part of gallery/
timeout $((150 * limit)) $PY -m benchmarks.run_pages --device "$device" --out "$OUT/pages" "${pages[@]}" \
    || status=1

step "done: status $status; results in $OUT"
ls -la "$OUT" "$OUT/pages" 2>/dev/null
exit $status
