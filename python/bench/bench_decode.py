"""Incremental decoding with svattn.torch.SVCache against re-running the full forward on the
growing sequence (docs/python.md "Incremental decoding"): both generate the same steps in one
process, alternating, and the ratio of their times is printed with the largest output difference.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_decode.py [--prompt 256 --steps 32]
"""
import argparse
import time

import torch

import svattn
import svattn.torch as st


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden-size", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    layer = st.SVAttention(a.hidden_size, a.heads,
                           st.ExactSettings(problem=svattn.ProblemSettings(C=0.3)), layer_idx=0).double()
    x = torch.randn(1, a.prompt + a.steps, a.hidden_size, dtype=torch.float64)
    full_t = cache_t = 0.0
    diff = 0.0
    with torch.no_grad():
        cache = st.SVCache()
        t0 = time.perf_counter()
        layer(x[:, :a.prompt], past_key_values=cache)
        prompt_t = time.perf_counter() - t0
        for s in range(a.prompt, a.prompt + a.steps):
            t0 = time.perf_counter()
            y_full = layer(x[:, :s + 1])[:, -1]
            t1 = time.perf_counter()
            y_step = layer(x[:, s:s + 1], past_key_values=cache)[:, 0]
            t2 = time.perf_counter()
            full_t, cache_t = full_t + t1 - t0, cache_t + t2 - t1
            diff = max(diff, (y_full - y_step).abs().max().item())
    print(f"SVAttention exact, hidden_size {a.hidden_size}, {a.heads} heads, prompt {a.prompt}, "
          f"{a.steps} steps, {a.threads} thread(s); prompt into the cache {prompt_t:.3f} s")
    print(f"per step: full forward {1e3 * full_t / a.steps:.2f} ms, cached {1e3 * cache_t / a.steps:.2f} ms, "
          f"ratio {full_t / cache_t:.1f}x; max |difference| {diff:.1e}")


if __name__ == "__main__":
    main()
