#!/usr/bin/env bash
# E5 and E6 at paper scale on one CUDA GPU (docs/experiments.md "GPU presets"): builds svattn
# against the LibTorch of an installed Python torch with CUDA, then runs
#   svattn reproduce --preset paper --only E5,E6 --set E5.device=cuda --set E5.max_seconds=...
# writing the same report (REPORT.md / REPORT.json, E5.*, E6.*) as the CPU presets.
#
# Usage: scripts/gpu-paper.sh [OUT_DIR]            (default out/gpu-paper)
#   PYTHON=...            interpreter whose torch is used (default python3)
#   SVATTN_GPU_MINUTES=N  training budget per model in minutes (default 10)
#   SVATTN_GPU_BUILD=DIR  build directory (default build-gpu)
#   SVATTN_DATA=DIR       data directory (enwik8 prefix), as for every experiment
# Exit status: 0 ok, 1 an experiment failed, 3 no usable CUDA torch / device (nothing built or run).
set -euo pipefail

cd "$(dirname "$0")/.."
out=${1:-out/gpu-paper}
py=${PYTHON:-python3}
minutes=${SVATTN_GPU_MINUTES:-10}
build=${SVATTN_GPU_BUILD:-build-gpu}

die() {
  echo "gpu-paper: $*" >&2
  exit 3
}

[[ "$minutes" =~ ^[1-9][0-9]*$ ]] || die "SVATTN_GPU_MINUTES must be a positive integer (got '$minutes')"
command -v "$py" > /dev/null || die "no Python interpreter '$py' (set PYTHON=...)"
"$py" -c 'import torch' 2> /dev/null ||
  die "'$py' has no torch module: install a CUDA build of torch for it, or set PYTHON=... to one that has it"

# One line: version, CUDA version of the build (None without CUDA), available, devices, C++11 ABI.
read -r version cuda_build available devices abi < <("$py" -c '
import torch
print(torch.__version__, torch.version.cuda, int(torch.cuda.is_available()),
      torch.cuda.device_count(), int(torch.compiled_with_cxx11_abi()))')
[[ "$cuda_build" != "None" ]] ||
  die "torch $version of '$py' is built without CUDA: no CUDA device can be used (install a CUDA build of torch)"
[[ "$available" == 1 && "$devices" -ge 1 ]] ||
  die "no CUDA device found (torch $version, CUDA $cuda_build: torch.cuda.is_available() is False); this script needs one GPU"
[[ "$abi" == 1 ]] ||
  die "torch $version uses the pre-C++11 std::string ABI; svattn links Debian's C++ libraries (C++11 ABI): use a torch >= 2.6 wheel or a source build"
prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')
gpu=$("$py" -c 'import torch; print(torch.cuda.get_device_name(0))')
echo "gpu-paper: torch $version (CUDA $cuda_build) from $prefix; device 0: $gpu"

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DSVATTN_WITH_TORCH=ON -DSVATTN_BUILD_PYTHON=OFF -DSVATTN_BUILD_TESTS=OFF -DSVATTN_BUILD_BENCH=OFF
cmake --build "$build" -j"$(nproc)" --target svattn svattn-torch

budget=$((minutes * 60))
exec "$build/apps/svattn/svattn" reproduce --preset paper --only E5,E6 --out "$out" \
  --set E5.device=cuda --set E5.max_seconds="$budget" --set E6.device=cuda
