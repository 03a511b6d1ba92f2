#!/usr/bin/env bash
# The main job (`make run`): reproduces the paper's experiments with the quick preset into $2
# (default out/run) and prints where the report is. Experiments that need trained models are
# reported as "not yet available" unless this build has LibTorch (docs/experiments.md).
# Builds without `svattn reproduce` (no experiments library) fall back to the demo.
set -euo pipefail
build=${1:-build}; out=${2:-out/run}
svattn="$build/apps/svattn/svattn"
mkdir -p "$out"
if "$svattn" reproduce --help >/dev/null 2>&1; then
  status=0
  "$svattn" reproduce --preset quick --out "$out" || status=$?
  if [ -f "$out/REPORT.md" ]; then
    echo
    echo "Report: $(cd "$out" && pwd)/REPORT.md"
    echo "        $(cd "$out" && pwd)/REPORT.json (same numbers, machine-readable)"
  fi
  exit "$status"
fi
exec "$svattn" demo --out "$out"
