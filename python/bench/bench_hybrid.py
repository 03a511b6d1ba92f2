"""HybridAttention forward+backward tokens/s from Python against the C++ layer (docs/performance.md
"Python"), in ONE process: the C++ HybridSvAttention layer is a TorchScript custom class
(torch.classes.svattn_bench.HybridStep, build/python/libsvattn_bench_hybrid.so, timed inside C++),
the Python side is svattn.torch.HybridAttention timed around each step. The two sides alternate
step by step (which goes first alternates too) on copies of the same input, both modules built
after torch.manual_seed(seed), so both see the same machine load; the figure is the median of the
per-pair ratios Python / C++ with their spread. Each step is timed twice: wall time and the
process's CPU time (time.process_time, CLOCK_PROCESS_CPUTIME_ID on the C++ side). On a shared
machine a step of tens of seconds sees the load change within it, which moves wall times by 2x;
the CPU time does not count the time other processes hold the cores, so with --threads 1 its
ratio is the robust figure there (on a quiet machine the two agree).

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_hybrid.py \
        --lib build/python/libsvattn_bench_hybrid.so [--d-model 256 --heads 4 --seq 512 --batch 8]
"""
import argparse
import os
import statistics
import time

torch = st = None  # imported by main() after the BLAS thread count is set


def import_torch(threads):
    """Imports torch with OpenBLAS (Debian's torch runs its GEMMs on it) and OpenMP limited to
    `threads`: torch.set_num_threads does not reach OpenBLAS's own pool, whose worker otherwise
    spins beside a 1-thread run and adds its scheduling to every step's time."""
    global torch, st
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = str(threads)
    import torch as torch_module
    import svattn.torch as st_module
    torch, st = torch_module, st_module
    torch.set_num_threads(threads)


def build(a):
    torch.classes.load_library(a.lib)
    torch.manual_seed(a.seed)
    py = st.HybridAttention(a.d_model, a.heads, chunk=a.chunk, path=a.path)
    cpp = (PyAsCpp(a) if a.control == "python" else
           torch.classes.svattn_bench.HybridStep(a.d_model, a.heads, a.chunk, a.path, a.seed))
    g = torch.Generator().manual_seed(a.seed + 1)
    x0 = torch.randn(a.batch, a.seq, a.d_model, generator=g)
    return py, cpp, x0.clone().requires_grad_(True), x0.clone().requires_grad_(True)


class PyAsCpp:
    """A second Python module in the C++ side's place (--control python): an A/A run that shows
    the method's own spread and bias (two identical sides should give a ratio of 1)."""

    def __init__(self, a):
        torch.manual_seed(a.seed)
        self.m = st.HybridAttention(a.d_model, a.heads, chunk=a.chunk, path=a.path)

    def step(self, x):
        return py_step(self.m, x)

    def support_mean(self, x):
        return py_support_mean(self.m, x)

    def num_parameters(self):
        return sum(t.numel() for t in self.m.parameters())


def py_step(m, x):
    c0, t0 = time.process_time(), time.perf_counter()
    m(x).sum().backward()
    return time.perf_counter() - t0, time.process_time() - c0


def py_support_mean(m, x):
    """One untimed forward with diagnostics (a host sync; the timed steps compute none)."""
    with torch.no_grad():
        return m(x, return_diagnostics=True)[1]["support_mean"]


def spread(ratios):
    r = sorted(ratios)
    return f"median {statistics.median(r):.3f}, range {r[0]:.3f}-{r[-1]:.3f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True, help="build/python/libsvattn_bench_hybrid.so")
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=64)
    ap.add_argument("--path", default="batched")
    ap.add_argument("--pairs", type=int, default=3, help="timed (C++, Python) pairs")
    ap.add_argument("--warmup", type=int, default=1, help="untimed pairs first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="LibTorch, OpenMP and OpenBLAS threads")
    ap.add_argument("--control", choices=("cpp", "python"), default="cpp",
                    help="python: an A/A run, a second Python module in the C++ side's place")
    a = ap.parse_args()
    import_torch(a.threads)
    py, cpp, x_py, x_cpp = build(a)
    rows = []
    for r in range(a.warmup + a.pairs):
        if r % 2 == 0:
            c, p = cpp.step(x_cpp), py_step(py, x_py)
        else:
            p, c = py_step(py, x_py), cpp.step(x_cpp)
        if r >= a.warmup:
            rows.append((c, p))
            print(f"pair {r - a.warmup}: wall C++ {c[0]:.3f} s Python {p[0]:.3f} s "
                  f"(ratio {p[0] / c[0]:.3f}); CPU C++ {c[1]:.3f} s Python {p[1]:.3f} s "
                  f"(ratio {p[1] / c[1]:.3f})", flush=True)
    tokens = a.batch * a.seq
    print(f"HybridAttention fwd+bwd, d_model {a.d_model}, {a.heads} heads, seq {a.seq}, batch "
          f"{a.batch}, chunk {a.chunk}, path {a.path}, {a.threads} threads, {len(rows)} pairs "
          f"alternating in one process (after {a.warmup} untimed)")
    for k, clock in ((0, "wall"), (1, "CPU ")):
        c_med = statistics.median(c[k] for c, _ in rows)
        p_med = statistics.median(p[k] for _, p in rows)
        c_min, p_min = min(c[k] for c, _ in rows), min(p[k] for _, p in rows)
        print(f"{clock}: C++ {c_med:8.3f} s/step {tokens / c_med:8.0f} tokens/s | Python "
              f"{p_med:8.3f} s/step {tokens / p_med:8.0f} tokens/s | Python/C++ per pair: "
              f"{spread(p[k] / c[k] for c, p in rows)}; fastest steps {p_min / c_min:.3f}")
    cpp_support = cpp.support_mean(x_cpp) if a.control == "python" else cpp.support_mean()
    print(f"support mean: C++ {cpp_support:.2f}, Python {py_support_mean(py, x_py):.2f}; "
          f"parameters: C++ {cpp.num_parameters()}, Python {sum(t.numel() for t in py.parameters())}")


if __name__ == "__main__":
    main()
