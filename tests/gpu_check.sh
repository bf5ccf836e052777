#!/usr/bin/env bash
# The course on a CUDA GPU with the machine's own torch and jax (as on a Colab GPU runtime): the memory tests, including
# the CUDA-allocator test that CPU machines skip, then every lesson, solution and exercise under nbval. Run from the
# repository root on a GPU machine whose python3 has torch; WHEELS (default .whl) may hold wheels of the notebook
# tools it lacks (nbval, nbclient, ipykernel, ipywidgets, datasets, ...). Writes logs to OUT (default ./gpu-check).
set -u
OUT=${OUT:-gpu-check}
WHEELS=${WHEELS:-.whl}
mkdir -p "$OUT"
SITE=$(mktemp -d)
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$WHEELS"/*.whl || exit 1
fi
export PYTHONPATH=$SITE:$PWD/src  # the course package from this checkout (nothing to build)
# its pytest plugin (nbval's patience on a busy machine) is an entry point of the installed package: name it when absent
PLUGIN=$(python3 -c "import importlib.metadata as m; print(any(e.name == 'gradacc' for e in m.entry_points(group='pytest11')))")
export PLUGIN_ARGS=$([ "$PLUGIN" = True ] || echo "-p gradacc.course.pytest_plugin")
python3 - <<'EOF'
import jax, torch, transformers
print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; jax {jax.__version__} {jax.devices()}; "
      f"transformers {transformers.__version__}")
from gradacc.memory.widgets import CUDA_CONTEXT_MIB, gpu_capacity
free, total = torch.cuda.mem_get_info(0)
print(f"{gpu_capacity()[0]}: total - free after the context = {(total - free) / 2**20:.0f} MiB "
      f"(the presets allow {CUDA_CONTEXT_MIB:.0f} MiB)")
EOF
python3 -m pytest -q -p no:cacheprovider -o addopts= tests/test_memory.py 2>&1 | tee "$OUT/memory.log" | tail -3
# every notebook in a kernel of its own, 6 at a time (the machine has the cores; the GPU has the memory)
run_one() {
    nb=$1
    mode=--nbval-lax
    [ "${nb%%/*}" = exercises ] && mode=--nbval  # an exercise must fail exactly at its checks
    log="$LOGS/$(echo "$nb" | tr / _).log"
    start=$SECONDS
    timeout 400 python3 -m pytest -q -p no:cacheprovider $PLUGIN_ARGS -o addopts= "$mode" --nbval-current-env \
        --nbval-cell-timeout=300 "$nb" >"$log" 2>&1
    rc=$?
    failed=$(grep -oE '::(Cell [0-9]+|check [0-9.]+|cell [0-9]+/[0-9]+)' "$log" | sort -u | tr '\n' ' ')
    echo "$nb rc=$rc $((SECONDS - start))s failed: ${failed:-none}" >"$log.line"
}
export -f run_one
export LOGS=$(mktemp -d)
ls ${NOTEBOOKS:-lessons/*.ipynb solutions/*.ipynb exercises/*.ipynb} | xargs -P 6 -I{} bash -c 'run_one {}'
cat "$LOGS"/*.line | tee "$OUT/notebooks.log"
for f in $(ls "$LOGS"/lessons_*.log "$LOGS"/solutions_*.log 2>/dev/null); do
    grep -q "failed" "$f" && { echo "=== $f"; sed 's/\x1b\[[0-9;]*m//g' "$f" | grep -v "^\s*$" | head -c 5000; } >>"$OUT/notebooks.log"
done
