#!/usr/bin/env bash
# Compile-and-link check of the CUDA sources without a GPU (CI runs it where nvcc exists): each
# kernel family is built into a shared library for sm_90a, as cpp_extension does on the GPU
# machine, so compile errors and duplicate symbols show up before a device run; the kernels that
# spill registers are listed (ptxas), since a new spill in a hot loop costs time on the device.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
flags=(-O3 -std=c++17 -Icsrc/common -gencode=arch=compute_90a,code=sm_90a -Xcompiler -fPIC,-fvisibility=hidden)
for family in gemm attention; do
  objs=() pids=()
  for src in csrc/$family/*.cu; do
    obj="$build/$(basename "${src%.cu}").o"
    nvcc "${flags[@]}" --resource-usage -c "$src" -o "$obj" 2>"$obj.ptxas" &
    objs+=("$obj") pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || { cat "$build"/*.ptxas >&2; exit 1; }; done  # a failed compile fails the check
  # Undefined driver symbols (cuTensorMapEncode...) are fine in a shared library: the GPU
  # machine's libcuda provides them; duplicate definitions are what this link catches.
  nvcc -shared "${objs[@]}" -o "$build/lib$family.so"
  echo "nvcc check: csrc/$family -> lib$family.so ok (${#objs[@]} objects)"
  # Kernels that spill (ptxas): a change in this list is worth a look before a device run.
  awk '/Function properties for/ {fn = $NF} /spill stores/ && $5 > 0 && fn !~ /_INTERNAL_/ {print fn, $5}' \
    "${objs[@]/%/.ptxas}" | sort -u | { command -v c++filt >/dev/null && c++filt || cat; } |
    sed -E 's/\(CUtensorMap_st[^)]*\)|\((efta|ftg::(glb|thr))::(Params|Args)\)//; s/ ([0-9]+)$/: \1 B of spills/; s/^/  /'
done
