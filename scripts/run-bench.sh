#!/usr/bin/env bash
# Runs the benchmarks of a build and prints their Markdown tables (also saved under OUT).
#   scripts/run-bench.sh [BUILD_DIR=build] [OUT=out/bench]
set -euo pipefail
build=${1:-build}; out=${2:-out/bench}
mkdir -p "$out"
core="$build/bench/core"
if [[ ! -x "$core/bench_batch" || ! -x "$core/bench_forget" || ! -x "$core/bench_ingest" ]]; then
  echo "run-bench: $core/bench_batch, bench_forget or bench_ingest missing (configure with SVATTN_BUILD_BENCH=ON and libsvm-dev installed)" >&2
  exit 2
fi
{
  echo "# svattn core benchmarks ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, $(uname -m))"
  echo
  "$core/bench_batch" --n 1000,5000 --reps 3
  echo
  "$core/bench_forget" --n 1000,5000,20000 --stream-n 1000,5000,20000 --reps 3
  echo
  # The user's path: ingest by add, removals from that memory beside a restored one.
  "$core/bench_ingest" --n 20000 --chunks 1,24,64 --margin-tokens 10 --records 2
} | tee "$out/core.md"
echo "run-bench: tables saved to $out/core.md" >&2

# Store and layer benchmarks, when built.
if [[ -x "$build/bench/store/bench_store" ]]; then
  "$build/bench/store/bench_store" --n 20000 --d 64 --C 0.005 | tee "$out/store.md"
fi
if [[ -x "$build/bench/torch/bench_layers" ]]; then
  "$build/bench/torch/bench_layers" --reps 1 --threads 1 | tee "$out/torch.md"
fi
for b in "$build"/bench/lm/bench_*; do
  [[ -x "$b" ]] && "$b" | tee "$out/$(basename "$b").md"
done
echo "run-bench: all tables under $out" >&2
