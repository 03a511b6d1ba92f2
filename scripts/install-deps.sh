#!/usr/bin/env bash
# Installs the Debian 12 packages svattn needs, and only those that are missing.
# Idempotent; apt only; must run as root (or via sudo) when something is missing.
#
#   scripts/install-deps.sh            # core + torch + tests + bench + plots
#   SVATTN_NO_TORCH=1 scripts/install-deps.sh   # skip LibTorch (core-only deployment)
#   SVATTN_NO_POSTGRES=1 scripts/install-deps.sh     # skip PostgreSQL 15 and libpq (store backend)
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build pkg-config
  libeigen3-dev            # core linear algebra
  libssl-dev               # SHA-256 of canonical states
  libsqlite3-dev           # audited store
  zlib1g-dev               # gzip-compressed ICU data (experiments)
  libcli11-dev             # CLI parsing
  nlohmann-json3-dev       # JSON output / certificates
  libfmt-dev               # formatting
  libgtest-dev libgmock-dev   # tests
  libbenchmark-dev         # benchmarks
  libsvm-dev libsvm-tools  # external oracle (tests and comparisons only)
  gnuplot-nox              # plots
  pybind11-dev python3-dev python3-numpy python3-pytest   # Python package (for /usr/bin/python3)
  python3-venv python3-pip python3-setuptools python3-wheel  # its wheel, installed in a venv by the tests
)
if [ -z "${SVATTN_NO_TORCH:-}" ]; then
  # libopenblas0-pthread: without it Debian's LibTorch falls back to reference BLAS (~20x slower).
  # python3-torch: Debian's torch 1.13 (shares libtorch1.13 with libtorch-dev) for svattn.torch.
  pkgs+=(libtorch-dev libopenblas0-pthread python3-torch)
fi

if [ "${SVATTN_NO_POSTGRES:-0}" != "1" ]; then
  # libpq-dev: the store's PostgreSQL backend; postgresql-15 (Debian 12's): the throw-away test
  # server of `make test` (scripts/pg-cluster.sh, scripts/test-with-pg.sh).
  pkgs+=(libpq-dev postgresql-15)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
