#!/usr/bin/env bash
# CPU test of scripts/gpu-paper.sh (docs/gpu.md): the dry run with a small kit of its own (one
# package made here with dpkg-deb) unpacks the kit, re-points its absolute symlinks into the
# prefix, prints the build and run commands with the budget's per-model time and exits 0 without
# a GPU or torch; a bad --budget, an unknown option and a tampered kit exit 2 with one line.
# Usage: test_gpu_paper.sh SOURCE_DIR
set -uo pipefail
src=${1:?usage: test_gpu_paper.sh SOURCE_DIR}
script=$src/scripts/gpu-paper.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# A one-package kit: a header and an absolute symlink, as zlib1g-dev's libz.so has.
pkg=$tmp/pkg
mkdir -p "$pkg/DEBIAN" "$pkg/usr/include/kitprobe" "$pkg/usr/lib/x86_64-linux-gnu" "$pkg/lib/x86_64-linux-gnu"
printf 'Package: kitprobe\nVersion: 1.0-1\nArchitecture: all\nMaintainer: svattn tests <t@example.org>\nDescription: kit probe\n' > "$pkg/DEBIAN/control"
echo '#define KITPROBE 1' > "$pkg/usr/include/kitprobe/probe.h"
echo lib > "$pkg/lib/x86_64-linux-gnu/libprobe.so.1"
ln -s /lib/x86_64-linux-gnu/libprobe.so.1 "$pkg/usr/lib/x86_64-linux-gnu/libprobe.so"
kit=$tmp/kit
mkdir -p "$kit/debs"
dpkg-deb --build --root-owner-group "$pkg" "$kit/debs/kitprobe_1.0-1_all.deb" > /dev/null || fail "dpkg-deb --build"
sum=$(sha256sum "$kit/debs/kitprobe_1.0-1_all.deb" | cut -d' ' -f1)
printf 'package\tversion\tarchitecture\tsha256\tfile\nkitprobe\t1.0-1\tall\t%s\tdebs/kitprobe_1.0-1_all.deb\n' "$sum" > "$kit/MANIFEST.tsv"

# Dry run, no torch: exit 0, the kit unpacked, the commands printed.
out=$(PYTHON=/nonexistent/python3 "$script" --dry-run --kit "$kit" --build "$tmp/b" --budget 600 "$tmp/report" 2>&1)
rc=$?
[[ $rc -eq 0 ]] || fail "dry run exit $rc (want 0): $out"
prefix=$tmp/b/kit-prefix
[[ -f "$prefix/usr/include/kitprobe/probe.h" ]] || fail "kit header not unpacked into $prefix"
[[ "$(readlink "$prefix/usr/lib/x86_64-linux-gnu/libprobe.so")" == "$prefix/lib/x86_64-linux-gnu/libprobe.so.1" ]] ||
  fail "absolute symlink not re-pointed into the prefix: $(readlink "$prefix/usr/lib/x86_64-linux-gnu/libprobe.so")"
# 600 s: E6 gets 120 s; (600 - 120) * 3/4 / 13 = 27 s per E5 model, 150 test windows; stop at 660 s.
for want in "reproduce --preset paper --only E5\\,E6" "E5.max_seconds=27 " "E5.test_windows=150 " \
  "E5.device=cuda" "E6.device=cuda" \
  "timeout --signal=INT 660" "-DSVATTN_BUILD_STORE=OFF" "-DCMAKE_PREFIX_PATH=" "$prefix/usr" \
  "cmake --build $tmp/b" "--target svattn" "--out $tmp/report"; do
  grep -qF -- "$want" <<< "$out" || fail "dry-run output lacks '$want': $out"
done
[[ ! -e "$tmp/b/build.ninja" ]] || fail "the dry run configured a build"

# Without dpkg (a non-Debian GPU image): the same unpacking by ar and tar.
shim=$tmp/shim
mkdir -p "$shim"
for tool in bash dirname mkdir nproc sha256sum cut ar grep tar xz gzip rm find readlink ln wc cat; do
  ln -s "$(command -v "$tool")" "$shim/$tool" || fail "no $tool for the dpkg-less run"
done
out=$(PATH=$shim PYTHON=/nonexistent/python3 "$script" --dry-run --kit "$kit" --build "$tmp/b4" 2>&1)
rc=$?
[[ $rc -eq 0 ]] || fail "dry run without dpkg: exit $rc (want 0): $out"
[[ -f "$tmp/b4/kit-prefix/usr/include/kitprobe/probe.h" ]] || fail "ar/tar fallback did not unpack: $out"
[[ "$(readlink "$tmp/b4/kit-prefix/usr/lib/x86_64-linux-gnu/libprobe.so")" == "$tmp/b4/kit-prefix/lib/x86_64-linux-gnu/libprobe.so.1" ]] ||
  fail "ar/tar fallback: absolute symlink not re-pointed"

# Default budget 480: 22 s per model.
out=$(PYTHON=/nonexistent/python3 "$script" --dry-run --kit "$kit" --build "$tmp/b2" 2>&1)
grep -qF "E5.max_seconds=22 " <<< "$out" || fail "default budget: want E5.max_seconds=22: $out"

# Two calls: --build-only prints the build and no run, --skip-build the run and no build.
out=$(PYTHON=/nonexistent/python3 "$script" --dry-run --kit "$kit" --build "$tmp/b5" --build-only 2>&1)
grep -qF "cmake --build $tmp/b5" <<< "$out" || fail "--build-only: no build command: $out"
! grep -qF "reproduce" <<< "$out" || fail "--build-only: a run command: $out"
out=$(PYTHON=/nonexistent/python3 "$script" --dry-run --build "$tmp/b5" --skip-build 2>&1)
grep -qF "$tmp/b5/apps/svattn/svattn reproduce" <<< "$out" || fail "--skip-build: no run command: $out"
! grep -qF "cmake" <<< "$out" || fail "--skip-build: a build command: $out"

# Bad arguments: exit 2, one line on stderr naming the value.
check_bad() {
  local want=$1
  shift
  local err rc
  err=$("$script" "$@" 2>&1 > /dev/null)
  rc=$?
  [[ $rc -eq 2 ]] || fail "$* exit $rc (want 2)"
  [[ $(wc -l <<< "$err") -eq 1 ]] || fail "$*: want one line on stderr, got: $err"
  grep -qF -- "$want" <<< "$err" || fail "$*: message does not name '$want': $err"
}
check_bad "'12x'" --dry-run --budget 12x
check_bad "'60'" --dry-run --budget 60
check_bad "'-5'" --dry-run --budget -5
check_bad "'0'" --dry-run --jobs 0
check_bad "'--frob'" --dry-run --frob
check_bad "'--skip-build'" --dry-run --build-only --skip-build
check_bad "$tmp/none" --dry-run --kit "$tmp/none"
echo tampered >> "$kit/debs/kitprobe_1.0-1_all.deb"
check_bad "kitprobe_1.0-1_all.deb" --dry-run --kit "$kit" --build "$tmp/b3"

[[ $failures -eq 0 ]] || exit 1
echo "test_gpu_paper: ok"
