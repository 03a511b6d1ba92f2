"""Python call overhead against the C++ library (docs/performance.md "Python"): Memory.add,
Memory.remove and a 1,000-query readout on the same data and the same operation sequence, C++
(bench_overhead binary) and Python timed in the same run, interleaved rounds.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_overhead.py \
        --cpp build/python/bench_overhead [--n 2000 --dim 16 --reps 200 --rounds 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

import svattn


def python_run(base, extra, queries, bandwidth, C, reps):
    m = svattn.Memory(svattn.MemorySettings(bandwidth=bandwidth, C=C), base.shape[1])
    m.add_batch(np.arange(len(base)), base)
    add_s, remove_s, readout_s = [], [], []
    first = len(base)
    for r in range(reps):
        k = extra[r % len(extra)]
        t0 = time.perf_counter()
        m.add(first + r, k)
        add_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        m.remove(first + r)
        remove_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        m.readout(queries)
        readout_s.append(time.perf_counter() - t0)
    return {"add_s": add_s, "remove_s": remove_s, "readout_s": readout_s,
            "state_sha256": m.state_sha256}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpp", required=True)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bandwidth", type=float, default=3.0)
    ap.add_argument("--C", type=float, default=0.01)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    base = rng.normal(size=(a.n, a.dim))
    extra = rng.normal(size=(64, a.dim))
    queries = rng.normal(size=(1000, a.dim))
    tmp = tempfile.mkdtemp()
    paths = []
    for name, arr in (("base", base), ("extra", extra), ("queries", queries)):
        p = os.path.join(tmp, name + ".npy")
        np.save(p, arr)
        paths.append(p)
    rows = {k: {"cpp": [], "py": []} for k in ("add_s", "remove_s", "readout_s")}
    for _ in range(a.rounds):
        out = subprocess.run([a.cpp, *paths, str(a.bandwidth), str(a.C), str(a.reps)], check=True,
                             capture_output=True, text=True).stdout
        cpp = json.loads(out)
        py = python_run(base, extra, queries, a.bandwidth, a.C, a.reps)
        assert cpp["state_sha256"] == py["state_sha256"], "the two runs did different work"
        for k in rows:
            rows[k]["cpp"].extend(cpp[k])
            rows[k]["py"].extend(py[k])
    print(f"n={a.n} dim={a.dim} C={a.C} bandwidth={a.bandwidth} reps={a.reps} x rounds={a.rounds}; "
          f"median per call")
    print(f"{'call':<22}{'C++':>12}{'Python':>12}{'overhead':>12}{'ratio':>9}")
    for k, label in (("add_s", "Memory.add"), ("remove_s", "Memory.remove"),
                     ("readout_s", "readout(1000 queries)")):
        c, p = statistics.median(rows[k]["cpp"]), statistics.median(rows[k]["py"])
        print(f"{label:<22}{c * 1e6:>10.1f}us{p * 1e6:>10.1f}us{(p - c) * 1e6:>10.2f}us{p / c:>9.3f}")


if __name__ == "__main__":
    main()
