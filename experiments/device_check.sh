#!/usr/bin/env bash
# The checks of a GPU session, as one run that fits a short lease (about 9 minutes on an H200):
#   1. the same JSON on the GPU as on the CPU, for a snapshot (with compaction and inflation)
#      and an event replay, byte for byte;
#   2. the benchmarks at sizes that fit: snapshot (against numba), evolution, compaction,
#      event mode (a 10,000-task prefix of the Google sample) and the trace load.
# Each step has its own time limit, so one that runs long costs only itself. Output: the log
# and each benchmark's JSON under $OUT (default results/gpu).
#
#   OUT=results/gpu TRACE_DIR=../shared/data/google2011 [CHECKS=compare|bench] bash experiments/device_check.sh
set -u
OUT=${OUT:-results/gpu}
TRACE=${TRACE_DIR:-../shared/data/google2011}
PY=${PYTHON:-python3}
CHECKS=${CHECKS:-compare,bench}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
TMP=$(mktemp -d)

step() {  # step SECONDS NAME COMMAND...: run with a limit and say how it ended
    local limit=$1 name=$2
    shift 2
    echo "== $(date +%T) $name (limit ${limit}s)"
    local t0=$SECONDS
    timeout "$limit" "$@"
    echo "== $name: exit $? after $((SECONDS - t0))s"
}

same_json() {  # same_json NAME ARGS...: the command's JSON on the GPU and on the CPU must be identical
    local name=$1
    shift
    step 60 "$name on the GPU" $PY -m jaxsched "$@" --quiet --json "$TMP/$name.gpu.json"
    step 60 "$name on the CPU" env JAX_PLATFORMS=cpu $PY -m jaxsched "$@" --quiet --json "$TMP/$name.cpu.json"
    if cmp -s "$TMP/$name.gpu.json" "$TMP/$name.cpu.json"; then
        echo "== $name: GPU and CPU JSON identical"
    else
        echo "== $name: GPU and CPU JSON DIFFER"
        $PY - "$TMP/$name.gpu.json" "$TMP/$name.cpu.json" <<'EOF'
import json, sys
g, c = (json.load(open(p))["policies"] for p in sys.argv[1:3])
for pol in g:
    for metric, v in g[pol].items():
        if v != c[pol].get(metric):
            print(f"   {pol}.{metric}: gpu {json.dumps(v)[:160]} | cpu {json.dumps(c[pol].get(metric))[:160]}")
EOF
    fi
}

{
    echo "== $(date -u +%FT%TZ) device check"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    $PY -c "import jax, numpy, pyarrow, optax; print('jax', jax.__version__, jax.devices(), 'numpy', numpy.__version__, 'pyarrow', pyarrow.__version__)"
    if [[ $CHECKS == *compare* ]]; then
    same_json snapshot snapshot --machines 400 --trials 4 --seed 3 --policy best_fit,alpha_evolve,first_fit,cosine
    same_json snapshot_k16 snapshot --machines 400 --trials 4 --seed 3 --policy best_fit,alpha_evolve --sample-k 16 --no-compaction --no-inflation
    same_json event event --machines 300 --trials 2 --seed 3 --policy best_fit,alpha_evolve --preempt
    fi
    if [[ $CHECKS == *bench* ]]; then
    step 120 bench_snapshot $PY experiments/bench_snapshot.py --repeats 3 --out "$OUT/bench_snapshot.json"
    step 90 bench_evolve $PY experiments/bench_evolve.py --repeats 1 --sequential 4 --out "$OUT/bench_evolve.json"
    step 120 bench_compaction $PY experiments/bench_compaction.py --depths 1,3 --baseline-searches 4 --out "$OUT/bench_compaction.json"
    step 100 bench_event $PY experiments/bench_event.py --quick --prefix 10000 --trace-dir "$TRACE" --out "$OUT/bench_event.json"
    step 45 bench_trace_load $PY experiments/bench_trace_load.py --repeats 1 --trace-dir "$TRACE" --out "$OUT/bench_trace_load.json"
    fi
    echo "== $(date +%T) done"
} 2>&1 | tee "$OUT/device_log.txt"
rm -rf "$TMP"
