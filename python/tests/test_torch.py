"""svattn.torch: gradcheck of both ops, gate-0 hybrid = local attention, causality of every module,
state_dict round trips, settings validation."""
import copy
import os

import numpy as np
import pytest

pytestmark = pytest.mark.torch
if os.environ.get("SVATTN_REQUIRE_TORCH"):  # the ctest `torch` label: a missing op library fails
    import torch
    import svattn.torch as st
else:
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("svattn.torch")

import svattn  # noqa: E402


def qkv(B=1, H=2, N=7, M=3, d=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    return mk(B, H, M, d), mk(B, H, N, d), mk(B, H, N, 2)


def test_exact_gradcheck():
    q, k, v = qkv()
    s = st.ExactSettings(problem=svattn.ProblemSettings(bandwidth=1.5, C=0.3))
    for t in (q, k, v):
        t.requires_grad_(True)
    ls = torch.full((2,), np.log(1.5), dtype=torch.float64, requires_grad=True)
    f = lambda q, k, v, ls: st.sv_attention(q, k, v, s, "exact", log_sigma=ls)  # noqa: E731
    assert torch.autograd.gradcheck(f, (q, k, v, ls), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_batched_gradcheck():
    q, k, v = qkv(seed=1)
    s = st.BatchedSettings(problem=svattn.ProblemSettings(bandwidth=1.5, C=0.3), fp64=True,
                           iterations=400)
    for t in (q, k, v):
        t.requires_grad_(True)
    f = lambda q, k, v: st.sv_attention(q, k, v, s, "batched")  # noqa: E731
    assert torch.autograd.gradcheck(f, (q, k, v), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_exact_matches_core_memory():
    q, k, v = qkv(B=1, H=1, N=12, M=4, seed=2)
    p = svattn.ProblemSettings(bandwidth=1.3, C=0.2)
    out = st.sv_attention(q, k, v, p, "exact")
    m = svattn.Memory(svattn.MemorySettings(problem=p), 3, value_dim=2)
    m.add_batch(np.arange(12), k[0, 0].numpy(), v[0, 0].numpy())
    assert np.allclose(out[0, 0].numpy(), m.readout(q[0, 0].numpy()), rtol=0, atol=1e-12)


def test_op_errors_are_value_errors():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="problem.C must be finite and > 0"):
        st.sv_attention(q, k, v, svattn.ProblemSettings(C=-1.0))
    with pytest.raises(ValueError, match="rbf"):
        st.sv_attention(q, k, v, svattn.ProblemSettings(kernel="linear"))
    with pytest.raises(ValueError, match="solve_ridge"):
        st.BatchedSettings(solve_ridge=-1.0).validate()
    with pytest.raises(ValueError, match="hybrid.batched.problem"):
        st.HybridSettings(batched=st.BatchedSettings(problem=svattn.ProblemSettings(C=0.5))).validate()
    with pytest.raises(ValueError):
        st.sv_attention(q, k[..., :2], v)  # key dimension mismatch, from the C++ op


@pytest.mark.parametrize("path", ["exact", "batched"])
def test_op_refuses_empty_and_non_finite_inputs(path):
    q, k, v = qkv()
    s = svattn.ProblemSettings(bandwidth=1.5, C=0.3)
    # N = 0 keys: an empty memory has no readout (an internal invariant / IndexError before).
    with pytest.raises(ValueError, match="keys must hold at least one key"):
        st.sv_attention(q, k[:, :, :0], v[:, :, :0], s, path)
    # A NaN key gave NaN outputs silently on the batched path.
    for name, bad in (("keys", k), ("values", v), ("queries", q)):
        t = bad.clone()
        t[0, 1, 0, 0] = float("nan") if name != "values" else float("inf")
        args = {"queries": q, "keys": k, "values": v}
        args[name] = t
        with pytest.raises(ValueError, match=f"{name} must be finite"):
            st.sv_attention(args["queries"], args["keys"], args["values"], s, path)


def test_exact_refuses_equal_keys_with_ridge_zero_under_gradient():
    q, k, v = qkv()
    k[0, 0, 3] = k[0, 0, 1]
    s = svattn.ProblemSettings(bandwidth=1.5, C=0.3, ridge=0.0)
    k.requires_grad_(True)
    with pytest.raises(ValueError, match="keys 1 and 3 .* are equal and problem.ridge = 0"):
        st.sv_attention(q, k, v, s, "exact")
    with torch.no_grad():  # no key gradient: the forward alone is defined
        assert torch.isfinite(st.sv_attention(q, k, v, s, "exact")).all()
    ok = st.sv_attention(q, k, v, svattn.ProblemSettings(bandwidth=1.5, C=0.3), "exact")
    ok.sum().backward()
    assert torch.isfinite(k.grad).all()


def make_modules(D=16, H=2):
    torch.manual_seed(0)
    return {
        "softmax": st.SoftmaxAttention(D, H),
        "swa": st.SlidingWindowAttention(D, H, window=5),
        "linear": st.LinearAttention(D, H, scan_chunk=4),
        "deltanet": st.DeltaNet(D, H, scan_chunk=4),
        "sv_exact": st.SVAttention(D, H, st.ExactSettings(problem=svattn.ProblemSettings(C=0.3)), chunk=3),
        "sv_batched": st.SVAttention(D, H, st.BatchedSettings(problem=svattn.ProblemSettings(C=0.3)), chunk=3),
        "hybrid_batched": st.HybridAttention(D, H, chunk=4, problem=svattn.ProblemSettings(C=0.25)),
        "hybrid_exact_token": st.HybridAttention(D, H, chunk=4, path="exact", gate="token",
                                                 problem=svattn.ProblemSettings(C=0.25)),
        "hybrid_window_position": st.HybridAttention(D, H, chunk=4, local="window", local_window=3,
                                                     gate="position",
                                                     problem=svattn.ProblemSettings(C=0.25)),
        "hybrid_exact_window_joint": st.HybridAttention(D, H, chunk=3, path="exact", gate="joint",
                                                        local="window", local_window=2,
                                                        problem=svattn.ProblemSettings(C=0.25)),
    }


@pytest.mark.parametrize("name", list(make_modules()))
def test_causality(name):
    m = make_modules()[name].double()
    torch.manual_seed(1)
    x = torch.randn(2, 13, 16, dtype=torch.float64)
    y = m(x)
    assert y.shape == x.shape and torch.isfinite(y).all()
    for t in (0, 4, 7, 11):
        x2 = x.clone()
        x2[:, t + 1:] += torch.randn_like(x2[:, t + 1:])
        y2 = m(x2)
        # fp64; rounding of the chunkwise scans only (the C++ test's bounds)
        assert (y2[:, :t + 1] - y[:, :t + 1]).abs().max() <= 1e-12, (name, t)
        if not (name.startswith("sv_") and t + 1 < 3):  # SVAttention's chunk 0 reads 0
            assert (y2[:, t + 1] - y[:, t + 1]).abs().max() > 1e-6, (name, t)


@pytest.mark.parametrize("name", list(make_modules()))
def test_empty_sequence_gives_empty_output(name):
    m = make_modules()[name].double()
    x = torch.randn(2, 0, 16, dtype=torch.float64, requires_grad=True)
    y = m(x)
    assert y.shape == (2, 0, 16)
    y.sum().backward()


@pytest.mark.parametrize("name", list(make_modules()))
def test_state_dict_round_trip(name, tmp_path):
    mods = make_modules()
    a = mods[name].double()
    with torch.no_grad():
        for p in a.parameters():
            p.add_(0.01 * torch.randn_like(p))
    torch.save(a.state_dict(), tmp_path / "a.pt")
    b = copy.deepcopy(make_modules()[name]).double()
    b.load_state_dict(torch.load(tmp_path / "a.pt"))
    x = torch.randn(1, 9, 16, dtype=torch.float64)
    assert torch.equal(a(x), b(x))


def test_hybrid_gate_zero_is_local_attention():
    m = st.HybridAttention(16, 2, chunk=4, gate_override=0.0).double()
    x = torch.randn(2, 12, 16, dtype=torch.float64)
    y, d = m(x, return_diagnostics=True)
    q, k, v = m._heads(x)
    ql, kl = st.apply_rope(q, 10000.0), st.apply_rope(k, 10000.0)
    ref = m._merge(st.chunk_local_attention(ql, kl, v, 4))
    assert torch.equal(y, ref)
    assert d["gate_mean"] == 0.0 and d["support_mean"] >= 1.0 and m.diagnostics is d


def test_hybrid_diagnostics_and_backward():
    m = st.HybridAttention(16, 2, chunk=4, problem=svattn.ProblemSettings(C=0.25))
    x = torch.randn(2, 12, 16, requires_grad=True)
    with st.record_diagnostics():
        m(x).sum().backward()
    d = m.diagnostics
    assert set(d) >= {"support_per_head", "support_mean", "gate_mean", "solver_seconds", "fista_residual"}
    assert len(d["support_per_head"]) == 2 and d["support_mean"] >= 1 / 0.25 - 1e-9
    assert abs(d["gate_mean"] - 0.5) < 1e-6  # sigmoid(0) with a zero gate projection
    assert m.log_sigma.grad is not None and x.grad is not None and torch.isfinite(x.grad).all()


def test_one_line_swap():
    class Block(torch.nn.Module):
        def __init__(self, attn):
            super().__init__()
            self.ln, self.attn = torch.nn.LayerNorm(16), attn

        def forward(self, x):
            return x + self.attn(self.ln(x))

    x = torch.randn(1, 8, 16)
    for attn in make_modules().values():
        assert Block(attn)(x).shape == x.shape
