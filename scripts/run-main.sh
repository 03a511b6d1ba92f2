#!/usr/bin/env bash
# The main job. Until `svattn reproduce` exists: a demo that solves a Gaussian problem and prints its
# partition and certificate summary.
set -euo pipefail
build=${1:-build}; out=${2:-out/run}
mkdir -p "$out"
if "$build/apps/svattn/svattn" reproduce --help >/dev/null 2>&1; then
  exec "$build/apps/svattn/svattn" reproduce --preset quick --out "$out"
fi
exec "$build/apps/svattn/svattn" demo --out "$out"
