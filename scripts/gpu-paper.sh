#!/usr/bin/env bash
# E5 and E6 at paper scale on one CUDA GPU within a time budget (docs/gpu.md): unpacks the Debian
# kit of scripts/gpu-kit.sh (when present) into a prefix inside the build directory, builds svattn
# against it and the LibTorch of the Python torch, and runs
#   svattn reproduce --preset paper --only E5,E6 --set E5.device=cuda --set E5.max_seconds=S
#     --set E5.test_windows=W --set E6.device=cuda
# writing the same report (REPORT.md / REPORT.json, E5.*, E6.*) as the CPU presets.
#
# Usage: scripts/gpu-paper.sh [--budget SECONDS] [--dry-run] [--kit DIR] [--build DIR] [--jobs N]
#                             [--build-only | --skip-build] [OUT_DIR]
#   OUT_DIR           report directory (default out/gpu-paper; relative paths here and in
#                     --kit/--build are taken from the repository root)
#   --budget SECONDS  wall time of the E5 + E6 runs, build excluded (default 480, 120..86400):
#                     a fifth is left to E6 and, of the rest, three quarters train E5's models
#                     (each model's max_seconds is that over the paper preset's 13 models), and
#                     each model's test BPC is over budget/4 evenly spaced test windows (the
#                     preset's whole test split, ~810 windows, needs budget >= 3240); the run is
#                     stopped at the budget plus 60 s
#   --dry-run         check the arguments, unpack the kit, print the build and run commands, exit 0
#                     (no GPU, no torch needed; nothing is built or run)
#   --kit DIR         the kit (default third_party/gpu-kit when it exists; without a kit the
#                     build uses the system's packages)
#   --build DIR       build directory (default build-gpu); the kit is unpacked in DIR/kit-prefix
#   --jobs N          build jobs (default: the number of cores)
#   --build-only      unpack, configure and build; run nothing (a first call on a machine that
#                     limits one command's time; the torch checks still apply)
#   --skip-build      run with the binaries an earlier --build-only left in the build directory
#   PYTHON=...        interpreter whose torch is used (default python3)
#   SVATTN_DATA=DIR   data directory (enwik8 prefix), as for every experiment
# Exit status: 0 ok, 1 the build or an experiment failed (or the run passed its stop time),
# 2 bad arguments (one line naming the bad value), 3 no usable CUDA torch, GPU or compiler
# (nothing built or run).
set -euo pipefail

cd "$(dirname "$0")/.."
kE5Models=13  # the paper preset's E5 runs: 3 seeds x 3 models (3m pair) + 2 x 2 (10m pairs)
kArch=x86_64-linux-gnu

usage_error() {
  echo "gpu-paper: $*" >&2
  exit 2
}
no_cuda() {
  echo "gpu-paper: $*" >&2
  exit 3
}
is_count() { [[ "$1" =~ ^[1-9][0-9]{0,5}$ ]]; }

budget=480 dry=0 kit="" build=build-gpu jobs="" out="" stage=all
while [[ $# -gt 0 ]]; do
  case "$1" in
    --budget) [[ $# -ge 2 ]] || usage_error "--budget needs a value"; budget=$2; shift 2 ;;
    --kit) [[ $# -ge 2 ]] || usage_error "--kit needs a value"; kit=$2; shift 2 ;;
    --build) [[ $# -ge 2 ]] || usage_error "--build needs a value"; build=$2; shift 2 ;;
    --jobs) [[ $# -ge 2 ]] || usage_error "--jobs needs a value"; jobs=$2; shift 2 ;;
    --dry-run) dry=1; shift ;;
    --build-only | --skip-build)
      [[ $stage == all ]] || usage_error "'$1' after '--$stage' (one of --build-only, --skip-build)"
      stage=${1#--}; shift ;;
    -*) usage_error "unknown option '$1'" ;;
    *) [[ -z "$out" ]] || usage_error "a second OUT_DIR '$1' (after '$out')"; out=$1; shift ;;
  esac
done
out=${out:-out/gpu-paper}
{ is_count "$budget" && ((budget >= 120 && budget <= 86400)); } ||
  usage_error "--budget must be an integer number of seconds in [120, 86400], got '$budget'"
[[ -z "$jobs" ]] || is_count "$jobs" || usage_error "--jobs must be a positive integer, got '$jobs'"
jobs=${jobs:-$(nproc)}
[[ -n "$build" ]] || usage_error "--build must not be empty"
if [[ -n "$kit" ]]; then
  [[ -f "$kit/MANIFEST.tsv" ]] || usage_error "--kit '$kit' has no MANIFEST.tsv (scripts/gpu-kit.sh makes one)"
elif [[ -f third_party/gpu-kit/MANIFEST.tsv ]]; then
  kit=third_party/gpu-kit
fi

e6_seconds=$((budget / 5))
per_model=$(((budget - e6_seconds) * 3 / 4 / kE5Models))
test_windows=$((budget / 4))
stop_after=$((budget + 60))

# A .deb without dpkg: its data.tar.* member, by ar and tar (xz, gzip, zstd or none).
unpack_deb() {
  local member flag=""
  member=$(ar t "$1" | grep '^data\.tar') || usage_error "--kit '$kit': $1 has no data.tar member"
  case "$member" in
    *.xz) flag=-J ;;
    *.gz) flag=-z ;;
    *.zst) flag=--zstd ;;
  esac
  ar p "$1" "$member" | tar -x $flag -C "$2" || usage_error "--kit '$kit': cannot unpack $1 ($member)"
}

# Unpacks every package of the manifest (sha256 checked) into $1 with dpkg -x (ar + tar where
# dpkg is missing), never over /; absolute symlinks are re-pointed into the prefix.
unpack_kit() {
  local prefix=$1 pkg ver arch sum file
  rm -rf "$prefix" && mkdir -p "$prefix"
  while IFS=$'\t' read -r pkg ver arch sum file; do
    [[ "$pkg" == package ]] && continue
    [[ -f "$kit/$file" ]] || usage_error "--kit '$kit': $file of MANIFEST.tsv is missing"
    [[ "$(sha256sum "$kit/$file" | cut -d' ' -f1)" == "$sum" ]] ||
      usage_error "--kit '$kit': $file does not match its sha256 in MANIFEST.tsv"
    if command -v dpkg > /dev/null; then
      dpkg -x "$kit/$file" "$prefix"
    else
      unpack_deb "$kit/$file" "$prefix"
    fi
  done < "$kit/MANIFEST.tsv"
  local link target
  while IFS= read -r link; do
    target=$(readlink "$link")
    [[ "$target" == /* && -e "$prefix$target" ]] && ln -sfn "$prefix$target" "$link"
  done < <(find "$prefix" -type l)
  echo "gpu-paper: kit $kit ($(($(wc -l < "$kit/MANIFEST.tsv") - 1)) packages) unpacked in $prefix"
}

# The cmake arguments that point every non-torch dependency at the unpacked prefix $1.
kit_cmake_args() {
  local u=$1/usr
  printf '%s\n' "-DEigen3_DIR=$u/share/eigen3/cmake" "-Dnlohmann_json_DIR=$u/share/cmake/nlohmann_json" \
    "-DCLI11_DIR=$u/share/cmake/CLI11" "-Dfmt_DIR=$u/lib/$kArch/cmake/fmt" \
    "-DOPENSSL_ROOT_DIR=$u" "-DOPENSSL_INCLUDE_DIR=$u/include" \
    "-DOPENSSL_CRYPTO_LIBRARY=$u/lib/$kArch/libcrypto.so" "-DOPENSSL_SSL_LIBRARY=$u/lib/$kArch/libssl.so" \
    "-DZLIB_INCLUDE_DIR=$u/include" "-DZLIB_LIBRARY=$u/lib/$kArch/libz.so" \
    "-DCMAKE_CXX_FLAGS=-isystem $u/include/$kArch" "-DCMAKE_BUILD_RPATH=$u/lib/$kArch;$1/lib/$kArch"
}

py=${PYTHON:-python3}
torch_prefix="<torch.utils.cmake_prefix_path of $py>"
if command -v "$py" > /dev/null && "$py" -c 'import torch' 2> /dev/null; then
  torch_prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')
elif [[ $dry -eq 0 ]]; then
  command -v "$py" > /dev/null || no_cuda "no Python interpreter '$py' (set PYTHON=...)"
  no_cuda "'$py' has no torch module: install a CUDA build of torch for it, or set PYTHON=... to one that has it"
fi

if [[ $dry -eq 0 ]]; then
  command -v c++ > /dev/null || command -v g++ > /dev/null || no_cuda "no C++ compiler (c++ or g++) on PATH"
  # One line: version, CUDA version of the build (None without CUDA), available, devices, C++11 ABI.
  read -r version cuda_build available devices abi < <("$py" -c '
import torch
print(torch.__version__, torch.version.cuda, int(torch.cuda.is_available()),
      torch.cuda.device_count(), int(torch.compiled_with_cxx11_abi()))')
  [[ "$cuda_build" != "None" ]] ||
    no_cuda "torch $version of '$py' is built without CUDA: no CUDA device can be used (install a CUDA build of torch)"
  [[ "$available" == 1 && "$devices" -ge 1 ]] ||
    no_cuda "no CUDA device found (torch $version, CUDA $cuda_build: torch.cuda.is_available() is False); this script needs one GPU"
  [[ "$abi" == 1 ]] ||
    no_cuda "torch $version uses the pre-C++11 std::string ABI; svattn links Debian's C++ libraries (C++11 ABI): use a torch >= 2.6 wheel or a source build"
  gpu=$("$py" -c 'import torch; print(torch.cuda.get_device_name(0))')
  echo "gpu-paper: torch $version (CUDA $cuda_build) from $torch_prefix; device 0: $gpu"
fi

prefix_path=$torch_prefix
kit_args=()
if [[ $stage == skip-build ]]; then
  [[ $dry -eq 1 || -x "$build/apps/svattn/svattn" ]] ||
    usage_error "--skip-build: no $build/apps/svattn/svattn (run --build-only first)"
  kit=""  # built already; the binaries' RUNPATH names the unpacked kit
fi
if [[ -n "$kit" ]]; then
  kit_prefix=$(mkdir -p "$build" && cd "$build" && pwd)/kit-prefix
  unpack_kit "$kit_prefix"
  prefix_path="$torch_prefix;$kit_prefix/usr"
  mapfile -t kit_args < <(kit_cmake_args "$kit_prefix")
  export LD_LIBRARY_PATH="$kit_prefix/usr/lib/$kArch:$kit_prefix/lib/$kArch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
configure=(cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=$prefix_path"
  -DSVATTN_WITH_TORCH=ON -DSVATTN_BUILD_PYTHON=OFF -DSVATTN_BUILD_TESTS=OFF -DSVATTN_BUILD_BENCH=OFF
  -DSVATTN_BUILD_STORE=OFF "${kit_args[@]}")
compile=(cmake --build "$build" -j"$jobs" --target svattn)
run=(timeout --signal=INT "$stop_after" "$build/apps/svattn/svattn" reproduce --preset paper --only E5,E6
  --out "$out" --set E5.device=cuda --set "E5.max_seconds=$per_model"
  --set "E5.test_windows=$test_windows" --set E6.device=cuda)
echo "gpu-paper: budget ${budget}s: E5 ${per_model}s of training per model (x$kE5Models), $test_windows test windows each; E6 ~${e6_seconds}s; stop at ${stop_after}s"
steps=(configure compile run)
[[ $stage == build-only ]] && steps=(configure compile)
[[ $stage == skip-build ]] && steps=(run)
if [[ $dry -eq 1 ]]; then
  echo "gpu-paper: dry run; would run:"
  for cmd in "${steps[@]}"; do
    declare -n c=$cmd
    printf ' %q' "${c[@]}"
    echo
  done
  exit 0
fi

if [[ $stage != skip-build ]]; then
  "${configure[@]}" || exit 1
  "${compile[@]}" || exit 1
fi
[[ $stage != build-only ]] || exit 0
rc=0
"${run[@]}" || rc=$?
if [[ $rc -eq 124 ]]; then
  echo "gpu-paper: the runs passed the budget plus 60 s and were stopped (--budget $budget)" >&2
  exit 1
fi
[[ $rc -eq 0 ]] || exit 1
