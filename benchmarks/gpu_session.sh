#!/usr/bin/env bash
# One short session on a lent GPU, prepared here and run there in one call (docs/scaling.md, "GPU
# figures"): install the carried wheels if the image lacks our pure-Python deps, check the rules
# on the GPU with the env test files, then time env, train, families and scaling.
#
#   bash benchmarks/gpu_session.sh quick   # every script once at smoke size (~3 min)
#   bash benchmarks/gpu_session.sh full    # the figures, then the tests (<= 9.5 min), under $OUT
#
# Wheels (not in git): see /work/.library/device/README.md; the set used is listed in
# docs/scaling.md. Everything lands in $OUT (at most 8 files come back from the device tool).
set -u
MODE=${1:-quick}
PY=${PY:-python3}
OUT=${OUT:-/tmp/gpu_session}
mkdir -p "$OUT"
LOG="$OUT/session.log"
export PYTHONUNBUFFERED=1
if ! "$PY" -c "import gymnax, pydantic, brax" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"

step() {  # step SECONDS NAME CMD...: one bounded step, its output appended to the log
  local limit=$1 name=$2; shift 2
  echo "=== $name ($(date +%T), limit ${limit}s): $*" | tee -a "$LOG"
  local t0=$SECONDS
  timeout "$limit" "$@" >>"$LOG" 2>&1
  echo "=== $name rc=$? in $((SECONDS - t0)) s" | tee -a "$LOG"
}

nvidia-smi -L 2>&1 | tee -a "$LOG"
"$PY" - <<'EOF' 2>&1 | tee -a "$LOG"
from importlib import metadata
import jax
print("devices", jax.devices())
for m in ("jax", "jaxlib", "flax", "optax", "chex", "orbax-checkpoint", "gymnax", "brax", "mujoco",
          "pydantic", "numpy"):
    try:
        print(m, metadata.version(m))
    except metadata.PackageNotFoundError:
        print(m, "MISSING")
EOF

# The rules, observations, plans and verifier on the GPU: integer logic, so results must match
# the CPU exactly (the tests compare with plain-Python references).
gpu_tests() {
  step "$1" pytest-gpu env JAX_PLATFORMS=cuda XLA_PYTHON_CLIENT_PREALLOCATE=false \
    "$PY" -m pytest -q -n 4 -p no:cacheprovider --timeout "$(($1 - 10))" \
    tests/jaxenv/mapf/test_env.py tests/jaxenv/mapf/test_env_differential.py tests/jaxenv/mapf/test_rules.py tests/jaxenv/mapf/test_obs.py \
    tests/jaxenv/mapf/plans/test_plan_semantics.py tests/designer/run/test_verify.py tests/jaxenv/test_wrappers.py tests/jaxenv/control/test_families.py
}
if [ "$MODE" = quick ]; then
  gpu_tests 170
  step 60 families-quick "$PY" benchmarks/families.py --quick --families cartpole brax:inverted_pendulum
  step 60 env-quick "$PY" benchmarks/env_throughput.py --quick --no-pogema
  step 90 train-quick "$PY" benchmarks/train_throughput.py --envs 256 --updates 2 --repeats 1
  step 60 pool-quick "$PY" benchmarks/pool_gen.py --pool-size 64 --chunks 4,64 --repeats 1
  step 90 scaling-quick "$PY" benchmarks/scaling.py --quick
else  # one device call of at most ~9.5 min: the figures first, the tests last
  step 60 pool "$PY" benchmarks/pool_gen.py --chunks 4,64,512 --repeats 2 \
    --json "$OUT/pool_gen_h200.json"
  step 110 train "$PY" benchmarks/train_throughput.py --case headline --envs 1024 \
    --json "$OUT/train_throughput_h200.json"
  step 70 env "$PY" benchmarks/env_throughput.py --no-pogema --cases headline \
    --json "$OUT/env_throughput_h200.json"
  step 110 families "$PY" benchmarks/families.py --explain --json "$OUT/families_h200.json"
  step 150 scaling "$PY" benchmarks/scaling.py --min-batch 256 --max-batch 1048576 --max-run-s 8 \
    --repeats 2 --json "$OUT/scaling_h200.json" --png "$OUT/scaling_h200.png"
  gpu_tests 90
fi
grep -E "^=== |passed|failed|error" "$LOG" | tail -n 40
