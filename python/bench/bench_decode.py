"""Incremental decoding with svattn.torch.SVCache against re-running the full forward on the
growing sequence (docs/python.md "Incremental decoding"), for SVAttention and HybridAttention on
the exact path: both generate the same steps in one process, alternating, and the ratio of their
times is printed with the largest output difference.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_decode.py [--prompt 256 --steps 32]
"""
import argparse
import time

import torch

import svattn
import svattn.torch as st


def layers(a):
    """The layers measured: (name, module), fp64, with layer_idx 0."""
    p = svattn.ProblemSettings(C=0.3)
    sv = st.SVAttention(a.hidden_size, a.heads, st.ExactSettings(problem=p), layer_idx=0)
    hybrid = st.HybridAttention(a.hidden_size, a.heads, path="exact", chunk=a.chunk, gate="token",
                                problem=p, layer_idx=0)
    joint = st.HybridAttention(a.hidden_size, a.heads, path="exact", chunk=a.chunk, gate="joint",
                               local="window", local_window=a.chunk, problem=p, layer_idx=0)
    return [("SVAttention exact, chunk 1", sv.double()),
            (f"HybridAttention exact, chunk {a.chunk}, local chunk, token gate", hybrid.double()),
            (f"HybridAttention exact, chunk {a.chunk}, local window {a.chunk}, joint gate",
             joint.double())]


def measure(layer, x, prompt, steps):
    """(prompt seconds, full seconds, cached seconds, max |difference|) over ``steps`` steps."""
    full_t = cache_t = diff = 0.0
    with torch.no_grad():
        cache = st.SVCache()
        t0 = time.perf_counter()
        layer(x[:, :prompt], past_key_values=cache)
        prompt_t = time.perf_counter() - t0
        for s in range(prompt, prompt + steps):
            t0 = time.perf_counter()
            y_full = layer(x[:, :s + 1])[:, -1]
            t1 = time.perf_counter()
            y_step = layer(x[:, s:s + 1], past_key_values=cache)[:, 0]
            t2 = time.perf_counter()
            full_t, cache_t = full_t + t1 - t0, cache_t + t2 - t1
            diff = max(diff, (y_full - y_step).abs().max().item())
    return prompt_t, full_t, cache_t, diff


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden-size", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--chunk", type=int, default=16, help="the hybrid's chunk")
    ap.add_argument("--prompt", type=int, default=256)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"hidden_size {a.hidden_size}, {a.heads} heads, prompt {a.prompt}, {a.steps} steps, "
          f"{a.threads} thread(s)")
    for name, layer in layers(a):
        torch.manual_seed(0)
        x = torch.randn(1, a.prompt + a.steps, a.hidden_size, dtype=torch.float64)
        prompt_t, full_t, cache_t, diff = measure(layer, x, a.prompt, a.steps)
        print(f"{name}: prompt into the cache {prompt_t:.3f} s; per step: full forward "
              f"{1e3 * full_t / a.steps:.2f} ms, cached {1e3 * cache_t / a.steps:.2f} ms, ratio "
              f"{full_t / cache_t:.1f}x; max |difference| {diff:.1e}")


if __name__ == "__main__":
    main()
