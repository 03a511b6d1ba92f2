#!/usr/bin/env bash
# Downloads the Debian packages that scripts/gpu-paper.sh needs to build E5/E6 on a bare, offline
# GPU machine (docs/gpu.md "The kit"): the headers and CMake files of the torch part's
# dependencies besides torch, and the shared libraries they link. They go into an ignored folder
# that travels with the working tree (default third_party/gpu-kit), with MANIFEST.tsv (package,
# version, architecture, sha256, file). Run here, where Debian's registry is reachable; no root
# needed (apt-get download).
#
# Usage: scripts/gpu-kit.sh [KIT_DIR]
# Exit status: 0 ok, 2 bad arguments, 3 apt-get download failed (no registry, unknown package).
set -euo pipefail

cd "$(dirname "$0")/.."
kit=${1:-third_party/gpu-kit}
if [[ $# -gt 1 || "$kit" == -* ]]; then
  echo "gpu-kit: bad argument '${2:-$kit}' (usage: scripts/gpu-kit.sh [KIT_DIR])" >&2
  exit 2
fi

# What the targets svattn and svattn-torch (E5, E6) find_package besides Torch, with the store
# off (gpu-paper.sh builds with SVATTN_BUILD_STORE=OFF: no SQLite, no libpq): Eigen3,
# nlohmann_json, CLI11 and fmt (CMake configs), OpenSSL and ZLIB (CMake's find modules); and the
# runtime libraries the -dev packages' .so links point to.
packages=(
  libeigen3-dev      # header-only
  nlohmann-json3-dev # header-only
  libcli11-dev       # header-only
  libfmt-dev libfmt9 # libfmt.so -> libfmt.so.9
  libssl-dev libssl3 # libcrypto.so -> libcrypto.so.3 (svattn_core's SHA-256)
  zlib1g-dev zlib1g  # libz.so -> libz.so.1 (gzip-compressed data of the experiments)
)

command -v apt-get > /dev/null || { echo "gpu-kit: apt-get not found (a Debian machine is needed)" >&2; exit 3; }
mkdir -p "$kit/debs"
rm -f "$kit"/debs/*.deb "$kit/MANIFEST.tsv"
if ! (cd "$kit/debs" && apt-get download -q "${packages[@]}" > /dev/null); then
  echo "gpu-kit: apt-get download failed for ${packages[*]}" >&2
  exit 3
fi

printf 'package\tversion\tarchitecture\tsha256\tfile\n' > "$kit/MANIFEST.tsv"
for deb in "$kit"/debs/*.deb; do
  read -r pkg ver arch < <(dpkg-deb -f "$deb" Package Version Architecture | awk -F': ' '{print $2}' | paste -sd' ')
  sum=$(sha256sum "$deb" | cut -d' ' -f1)
  printf '%s\t%s\t%s\t%s\t%s\n' "$pkg" "$ver" "$arch" "$sum" "debs/$(basename "$deb")" >> "$kit/MANIFEST.tsv"
done
n=$(($(wc -l < "$kit/MANIFEST.tsv") - 1))
[[ $n -eq ${#packages[@]} ]] || { echo "gpu-kit: expected ${#packages[@]} packages, got $n" >&2; exit 3; }
echo "gpu-kit: $n packages ($(du -sh "$kit/debs" | cut -f1)) in $kit; manifest $kit/MANIFEST.tsv"
