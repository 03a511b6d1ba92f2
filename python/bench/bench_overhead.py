"""Python call overhead against the C++ library (docs/performance.md "Python"): Memory.add,
Memory.remove and a 1,000-query readout. C++ and Python run in ONE process on the SAME memory
object: the C++ side is the small pybind11 module _svattn_bench_overhead
(python/bench/bench_overhead_ext.cpp), whose functions call svattn::Memory on the C++ object behind
a svattn.Memory and time that call inside C++; the Python side is svattn.Memory timed around each
call. Every rep runs the same operations (add a token, remove it, optionally read out) once through
C++ and once through Python (which goes first alternates), so the two calls of a pair do the same
work on the same state under the same cache state, CPU frequency and machine load.

The figure per call is the pair's Python wall time minus its C++ wall time: for calls under 1 ms
the median difference (target <= 5 us), for calls over 1 ms the median ratio (target <= 5 %).
The floor rows show what any Python call with add's arguments costs (a bound function that does
nothing) and what a GIL release + reacquire costs.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_overhead.py \
        [--n 2000 --dim 16 --reps 400]
"""
import argparse
import statistics
import time

import numpy as np

import _svattn_bench_overhead as cpp
import svattn

_CALLS = ("add", "remove", "readout")


def one_side(m, side, tid, key, queries, with_readout, rows):
    """Runs add, remove (and readout) once through C++ (side 0) or Python (side 1)."""
    pc = time.perf_counter
    if side == 0:
        rows["add"][0].append(cpp.add(m, tid, key))
        rows["remove"][0].append(cpp.remove(m, tid))
        if with_readout:
            rows["readout"][0].append(cpp.readout(m, queries))
        return
    t0 = pc()
    m.add(tid, key)
    t1 = pc()
    m.remove(tid)
    t2 = pc()
    rows["add"][1].append(t1 - t0)
    rows["remove"][1].append(t2 - t1)
    if with_readout:
        t0 = pc()
        m.readout(queries)
        rows["readout"][1].append(pc() - t0)


def run(m, extra, queries, first, reps, with_readout):
    rows = {c: ([], []) for c in _CALLS}
    for r in range(reps):
        for side in ((0, 1) if r % 2 == 0 else (1, 0)):
            one_side(m, side, first + r, extra[r % len(extra)], queries, with_readout, rows)
    return rows


def floor(m, key, tid, reps):
    pc = time.perf_counter
    t = []
    for _ in range(reps):
        t0 = pc()
        cpp.noop(m, tid, key)
        t.append(pc() - t0)
    return statistics.median(t), statistics.median(cpp.gil_roundtrip(1000) for _ in range(21))


def report(title, rows):
    print(f"\n{title}: per pair (same call through C++ and through Python)")
    print(f"{'call':<9}{'calls':>6}{'C++ med':>11}{'Py med':>11}{'Py - C++ (med, p25-p75)':>30}"
          f"{'ratio med':>11}")
    for call in _CALLS:
        c, p = rows[call]
        if not c:
            continue
        for name, keep in (("< 1 ms", lambda x: x < 1e-3), (">= 1 ms", lambda x: x >= 1e-3)):
            pairs = [(a, b) for a, b in zip(c, p) if keep(a)]
            if not pairs:
                continue
            d = sorted((b - a) * 1e6 for a, b in pairs)
            q = statistics.quantiles(d, n=4) if len(d) > 1 else [d[0]] * 3
            ratio = statistics.median(b / a for a, b in pairs)
            print(f"{call:<9}{len(pairs):>6}{statistics.median(a for a, _ in pairs) * 1e6:>9.1f}us"
                  f"{statistics.median(b for _, b in pairs) * 1e6:>9.1f}us"
                  f"{q[1]:>12.2f}us ({q[0]:.2f} to {q[2]:.2f}){'':>3}{ratio:>9.3f}   {name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--bandwidth", type=float, default=3.0)
    ap.add_argument("--C", type=float, default=0.01)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    base = np.ascontiguousarray(rng.normal(size=(a.n, a.dim)))
    extra = list(np.ascontiguousarray(rng.normal(size=(64, a.dim))))
    queries = np.ascontiguousarray(rng.normal(size=(1000, a.dim)))
    m = svattn.Memory(svattn.MemorySettings(bandwidth=a.bandwidth, C=a.C), a.dim)
    m.add_batch(np.arange(a.n), base)
    sha = m.state_sha256
    print(f"n={a.n} dim={a.dim} C={a.C} bandwidth={a.bandwidth} reps={a.reps} per workload; "
          "C++ and Python alternate on one memory object in one process")
    warm = run(m, extra, queries, a.n, a.reps, False)
    mixed = run(m, extra, queries, a.n + a.reps, a.reps, True)
    # Every rep adds a token and removes it again through both sides: the state is unchanged.
    assert m.state_sha256 == sha, "add-then-remove changed the state"
    noop, gil = floor(m, extra[0], a.n, 2000)
    report("warm (add, remove)", warm)
    report("with a 1,000-query readout between", mixed)
    print(f"\nfloor: a bound no-op with add's arguments {noop * 1e6:.2f} us per call (Python wall); "
          f"GIL release + reacquire {gil * 1e9:.0f} ns")


if __name__ == "__main__":
    main()
