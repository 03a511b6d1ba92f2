"""HybridAttention forward+backward tokens/s from Python against the C++ layer (docs/performance.md
"Python"), same shapes, same settings, same thread count, both timed in the same run, alternating.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_hybrid.py \
        --cpp build/python/bench_hybrid [--d-model 256 --heads 4 --seq 512 --batch 8]
"""
import argparse
import json
import statistics
import subprocess
import time

import torch

import svattn.torch as st


def python_times(a):
    torch.manual_seed(0)
    m = st.HybridAttention(a.d_model, a.heads, chunk=a.chunk, path=a.path)
    x = torch.randn(a.batch, a.seq, a.d_model, requires_grad=True)
    out = []
    for r in range(a.warmup + a.reps):
        t0 = time.perf_counter()
        m(x).sum().backward()
        if r >= a.warmup:
            out.append(time.perf_counter() - t0)
    return out, m.diagnostics["support_mean"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cpp", required=True)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--path", default="batched")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cpp_s, py_s = [], []
    for _ in range(a.rounds):
        out = subprocess.run([a.cpp, str(a.d_model), str(a.heads), str(a.seq), str(a.batch),
                              str(a.chunk), str(a.reps), str(a.warmup), str(a.threads), a.path],
                             check=True, capture_output=True, text=True).stdout
        cpp = json.loads(out)
        cpp_s += cpp["seconds"]
        p, sup = python_times(a)
        py_s += p
    tokens = a.batch * a.seq
    c, p = statistics.median(cpp_s), statistics.median(py_s)
    print(f"HybridAttention fwd+bwd, d_model {a.d_model}, {a.heads} heads, seq {a.seq}, batch "
          f"{a.batch}, chunk {a.chunk}, path {a.path}, {a.threads} threads, "
          f"{len(cpp_s)} timed steps each (median)")
    print(f"C++    {c:8.3f} s/step  {tokens / c:10.0f} tokens/s  (support {cpp['support_mean']:.1f})")
    print(f"Python {p:8.3f} s/step  {tokens / p:10.0f} tokens/s  (support {sup:.1f})")
    print(f"Python/C++ time ratio {p / c:.3f}")


if __name__ == "__main__":
    main()
