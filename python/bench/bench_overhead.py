"""Python call overhead against the C++ library (docs/performance.md "Python"): Memory.add,
Memory.remove and a 1,000-query readout, C++ and Python in ONE process on the same data and the
same operation sequence, alternating call by call (the C++ side is a small C ABI library loaded
with ctypes and timed inside C++), so that both sides see the same cache state, CPU frequency and
machine load.

Two figures per call:
  * C++ vs Python: the median of the C++ call (timed inside C++) against the median of the Python
    call (timed around it in Python) on two identical memories;
  * in-call overhead (add, remove): for each Python call, its wall time minus the seconds the C++
    operation itself reports (OpDiagnostics.seconds), i.e. everything the binding adds.
Two workloads: "warm" (add then remove, repeated) and "with readout" (a 1,000-query readout
between, as in an attention loop).

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_overhead.py \
        --lib build/python/libsvattn_bench_overhead.so [--n 2000 --dim 16 --reps 300]
"""
import argparse
import ctypes
import statistics
import time

import numpy as np

import svattn

_dp = ctypes.POINTER(ctypes.c_double)


def load(path):
    lib = ctypes.CDLL(path)
    lib.svattn_bench_create.restype = ctypes.c_void_p
    lib.svattn_bench_create.argtypes = [_dp, ctypes.c_long, ctypes.c_int, ctypes.c_double,
                                        ctypes.c_double]
    lib.svattn_bench_free.argtypes = [ctypes.c_void_p]
    for name, args in (("add", [ctypes.c_void_p, ctypes.c_long, _dp]),
                       ("remove", [ctypes.c_void_p, ctypes.c_long]),
                       ("readout", [ctypes.c_void_p, _dp, ctypes.c_long])):
        f = getattr(lib, "svattn_bench_" + name)
        f.restype, f.argtypes = ctypes.c_double, args
    lib.svattn_bench_state_sha256.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    return lib


def checked(t):
    if t < 0:
        raise RuntimeError("the C++ side of the benchmark failed")
    return t


def run(lib, handle, m, extra, queries, first, reps, with_readout, python_only=False):
    """Alternates C++ and Python call by call (which goes first alternates too); python_only runs
    the Python calls alone (no C++ call between them evicts their caches)."""
    rows = {k: [] for k in ("add_cpp", "add_py", "add_in", "remove_cpp", "remove_py",
                            "remove_in", "readout_cpp", "readout_py")}
    qp = queries.ctypes.data_as(_dp)
    for r in range(reps):
        k = extra[r % len(extra)]
        kp = k.ctypes.data_as(_dp)
        tid = first + r
        for side in ((1,) if python_only else (0, 1) if r % 2 == 0 else (1, 0)):
            if side == 0:
                rows["add_cpp"].append(checked(lib.svattn_bench_add(handle, tid, kp)))
                rows["remove_cpp"].append(checked(lib.svattn_bench_remove(handle, tid)))
                if with_readout:
                    rows["readout_cpp"].append(
                        checked(lib.svattn_bench_readout(handle, qp, len(queries))))
                continue
            t0 = time.perf_counter()
            d = m.add(tid, k)
            t1 = time.perf_counter()
            rows["add_py"].append(t1 - t0)
            rows["add_in"].append(t1 - t0 - d.seconds)
            t0 = time.perf_counter()
            d = m.remove(tid)
            t1 = time.perf_counter()
            rows["remove_py"].append(t1 - t0)
            rows["remove_in"].append(t1 - t0 - d.seconds)
            if with_readout:
                t0 = time.perf_counter()
                m.readout(queries)
                rows["readout_py"].append(time.perf_counter() - t0)
    return rows


def report(title, rows):
    med = {k: statistics.median(v) for k, v in rows.items() if v}
    print(f"\n{title}: medians per call")
    print(f"{'call':<24}{'C++':>11}{'Python':>11}{'Py - C++':>11}{'ratio':>8}{'in-call':>11}")
    for call in ("add", "remove", "readout"):
        if call + "_py" not in med:
            continue
        c, p = med.get(call + "_cpp", float("nan")), med[call + "_py"]
        inc = f"{med[call + '_in'] * 1e6:>9.2f}us" if call + "_in" in med else f"{'':>11}"
        print(f"{call:<24}{c * 1e6:>9.1f}us{p * 1e6:>9.1f}us{(p - c) * 1e6:>9.2f}us"
              f"{p / c:>8.3f}{inc}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--bandwidth", type=float, default=3.0)
    ap.add_argument("--C", type=float, default=0.01)
    a = ap.parse_args()
    lib = load(a.lib)
    rng = np.random.default_rng(0)
    base = np.ascontiguousarray(rng.normal(size=(a.n, a.dim)))
    extra = np.ascontiguousarray(rng.normal(size=(64, a.dim)))
    queries = np.ascontiguousarray(rng.normal(size=(1000, a.dim)))
    handle = lib.svattn_bench_create(base.ctypes.data_as(_dp), a.n, a.dim, a.bandwidth, a.C)
    if not handle:
        raise RuntimeError("svattn_bench_create failed")
    m = svattn.Memory(svattn.MemorySettings(bandwidth=a.bandwidth, C=a.C), a.dim)
    m.add_batch(np.arange(a.n), base)
    print(f"n={a.n} dim={a.dim} C={a.C} bandwidth={a.bandwidth} reps={a.reps} per workload; "
          "C++ and Python alternate call by call in one process")
    warm = run(lib, handle, m, extra, queries, a.n, a.reps, False)
    mixed = run(lib, handle, m, extra, queries, a.n + a.reps, a.reps, True)
    alone = run(lib, handle, m, extra, queries, a.n + 2 * a.reps, a.reps, False, python_only=True)
    sha = ctypes.create_string_buffer(65)
    lib.svattn_bench_state_sha256(handle, sha)
    # The Python memory ran one more workload (add-then-remove pairs leave the state unchanged).
    assert sha.value.decode() == m.state_sha256, "the two sides did different work"
    lib.svattn_bench_free(handle)
    report("warm (add, remove)", warm)
    report("with a 1,000-query readout between", mixed)
    report("Python alone (add, remove; no C++ call between)", alone)


if __name__ == "__main__":
    main()
