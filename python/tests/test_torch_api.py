"""svattn.torch as PyTorch users meet it: no host sync unless diagnostics are asked for, the cache
(step-by-step decoding equals the full forward), fla-style names with deprecated aliases, typed
errors naming the argument, TorchScript where torch 1.13 allows, and certified forgetting."""
import contextlib
import os
import warnings

import pytest

pytestmark = pytest.mark.torch
if os.environ.get("SVATTN_REQUIRE_TORCH"):
    import torch
    import svattn.torch as st
else:
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("svattn.torch")

import svattn  # noqa: E402


def modules(D=16, H=2):
    torch.manual_seed(0)
    p = svattn.ProblemSettings(C=0.3)
    return {
        "softmax": st.SoftmaxAttention(D, H), "swa": st.SlidingWindowAttention(D, H, window=5),
        "linear": st.LinearAttention(D, H, scan_chunk=4), "deltanet": st.DeltaNet(D, H, scan_chunk=4),
        "sv_exact": st.SVAttention(D, H, st.ExactSettings(problem=p), chunk=3),
        "sv_batched": st.SVAttention(D, H, st.BatchedSettings(problem=p), chunk=3),
        "hybrid": st.HybridAttention(D, H, chunk=4, problem=svattn.ProblemSettings(C=0.25)),
        "hybrid_exact": st.HybridAttention(D, H, chunk=4, path="exact", gate="token",
                                           problem=svattn.ProblemSettings(C=0.25)),
        "hybrid_window_joint": st.HybridAttention(D, H, chunk=4, local="window", local_window=3,
                                                  gate="joint", problem=svattn.ProblemSettings(C=0.25)),
    }


@contextlib.contextmanager
def count_host_syncs():
    """Counts Tensor.item/.cpu/.tolist/float(tensor) calls made from Python."""
    calls = []
    saved = {n: getattr(torch.Tensor, n) for n in ("item", "cpu", "tolist", "__float__")}

    def wrap(name):
        def f(self, *a, **k):
            calls.append(name)
            return saved[name](self, *a, **k)
        return f
    for n in saved:
        setattr(torch.Tensor, n, wrap(n))
    try:
        yield calls
    finally:
        for n, f in saved.items():
            setattr(torch.Tensor, n, f)


@pytest.mark.parametrize("name", list(modules()))
def test_forward_makes_no_host_sync_unless_asked(name):
    m = modules()[name]
    x = torch.randn(2, 11, 16)
    with count_host_syncs() as calls:
        m(x).sum().backward()
    assert calls == [], (name, calls)
    if name.startswith(("sv_", "hybrid")):
        with count_host_syncs() as calls:
            y, d = m(x, return_diagnostics=True)
        assert calls and d["support_mean"] >= 1.0 and m.diagnostics is d  # the counter sees syncs
        with count_host_syncs() as calls, st.record_diagnostics():
            m(x)
        assert calls and "support_per_head" in m.diagnostics


@pytest.mark.parametrize("chunk,bounded", [(1, False), (3, False), (4, True)])
def test_cached_decoding_equals_full_forward(chunk, bounded):
    torch.manual_seed(2)
    s = st.ExactSettings(problem=svattn.ProblemSettings(C=0.3), bounded=bounded)
    m = st.SVAttention(16, 2, s, chunk=chunk, layer_idx=0).double()
    with torch.no_grad():
        m.log_sigma.copy_(torch.tensor([0.1, -0.2]))
    x = torch.randn(2, 13, 16, dtype=torch.float64)
    full = m(x)
    cache = st.SVCache()
    steps = torch.cat([m(x[:, t:t + 1], past_key_values=cache) for t in range(13)], 1)
    assert (steps - full).abs().max() <= 1e-6
    assert cache.get_seq_length(0) == 13 and len(cache) == 1
    cache2 = st.SVCache()  # a prompt then single tokens
    parts = [m(x[:, :6], past_key_values=cache2)] + [m(x[:, t:t + 1], past_key_values=cache2)
                                                     for t in range(6, 13)]
    assert (torch.cat(parts, 1) - full).abs().max() <= 1e-6


def test_bind_cache_serves_a_model_that_does_not_pass_it():
    torch.manual_seed(3)
    model = torch.nn.Sequential(st.SVAttention(16, 2, chunk=1), torch.nn.GELU(),
                                st.SVAttention(16, 2, chunk=1)).double()
    x = torch.randn(1, 9, 16, dtype=torch.float64)
    full = model(x)
    cache = st.SVCache()
    with st.bind_cache(model, cache):
        steps = torch.cat([model(x[:, t:t + 1]) for t in range(9)], 1)
    assert (steps - full).abs().max() <= 1e-6 and sorted(cache.layers) == [0, 1]


def test_cache_errors_name_the_argument():
    x = torch.randn(1, 4, 16)
    with pytest.raises(ValueError, match="past_key_values.*exact path"):
        st.SVAttention(16, 2, st.BatchedSettings())(x, past_key_values=st.SVCache())
    with pytest.raises(TypeError, match="past_key_values"):
        st.SVAttention(16, 2)(x, past_key_values={})
    m, cache = st.SVAttention(16, 2), st.SVCache()
    m(x, past_key_values=cache)
    with pytest.raises(ValueError, match="past_key_values: layer 0 holds B=1"):
        m(torch.randn(2, 1, 16), past_key_values=cache)
    with pytest.raises(KeyError, match="layer_idx"):
        cache[5]
    with pytest.raises(TypeError, match="cache"):
        with st.bind_cache(m, None):
            pass
    with pytest.raises(TypeError, match="model"):
        with st.bind_cache(st.SoftmaxAttention(16, 2), st.SVCache()):
            pass


HYBRID_DECODING = [dict(local=lo, gate=g, rope=r, bounded=b, learn_bandwidth=lb)
                   for lo in ("chunk", "window") for g in ("chunk", "token", "position", "joint")
                   for r, b, lb in ((False, False, True), (True, True, False))] + [
    dict(gate_override=0.3), dict(normalize_keys=False, local="window", local_window=5),
    dict(chunk=1, local="window", local_window=4), dict(chunk=3, local="window", local_window=7,
                                                       rope=True)]


def hybrid_for_decoding(dtype=torch.float64, **kw):
    """An exact-path hybrid whose gate depends on its input (gate_proj and gate_position random,
    else the zero-initialised gate would be its bias alone) and per-head bandwidths."""
    torch.manual_seed(5)
    s = st.HybridSettings(path="exact", chunk=4, local_window=3,
                          problem=svattn.ProblemSettings(C=0.3))
    m = st.HybridAttention(16, 2, settings=s, **kw).to(dtype)
    with torch.no_grad():
        m.gate_proj.weight.normal_()
        m.log_sigma.copy_(torch.tensor([0.1, -0.2]))
        if hasattr(m, "gate_position"):
            m.gate_position.normal_()
    return m


@pytest.mark.parametrize("kw", HYBRID_DECODING,
                         ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
def test_hybrid_cached_decoding_equals_full_forward(kw):
    m = hybrid_for_decoding(**kw)
    x = torch.randn(2, 19, 16, dtype=torch.float64)
    full = m(x)
    gate_full = m.last_gate
    if "gate_override" not in kw:  # the gate mixes both paths, differently per token
        assert gate_full[:, :, 8:].std() > 1e-3
    cache = st.SVCache()
    steps = torch.cat([m(x[:, t:t + 1], past_key_values=cache) for t in range(19)], 1)
    assert (steps - full).abs().max() <= 1e-12
    assert cache.get_seq_length(0) == 19 and len(cache) == 1
    cache2, parts, t = st.SVCache(), [], 0  # a prompt, then pieces of 1 to 4 tokens
    for n in (6, 1, 3, 1, 4, 2, 1, 1):
        parts.append(m(x[:, t:t + n], past_key_values=cache2))
        t += n
    assert (torch.cat(parts, 1) - full).abs().max() <= 1e-12
    assert (m.last_gate - gate_full[:, :, 18:]).abs().max() <= 1e-12


@pytest.mark.parametrize("local", ["chunk", "window"])
def test_hybrid_cached_decoding_fp32_and_without_memory(local):
    m = hybrid_for_decoding(torch.float32, local=local, gate="joint")
    x = torch.randn(1, 17, 16)
    cache = st.SVCache()
    steps = torch.cat([m(x[:, t:t + 1], past_key_values=cache) for t in range(17)], 1)
    assert (steps - m(x)).abs().max() <= 1e-6
    m = hybrid_for_decoding(local=local, memory=False, path="batched")  # no memory: any path
    x = x.double()
    cache = st.SVCache()
    steps = torch.cat([m(x[:, t:t + 1], past_key_values=cache) for t in range(17)], 1)
    assert (steps - m(x)).abs().max() <= 1e-12


def test_bind_cache_serves_a_hybrid_model():
    torch.manual_seed(3)
    model = torch.nn.Sequential(hybrid_for_decoding(gate="chunk"), torch.nn.GELU(),
                                st.SVAttention(16, 2, chunk=2), torch.nn.GELU(),
                                hybrid_for_decoding(local="window", gate="joint")).double()
    x = torch.randn(1, 14, 16, dtype=torch.float64)
    full = model(x)
    cache = st.SVCache()
    with st.bind_cache(model, cache):
        steps = torch.cat([model(x[:, t:t + 1]) for t in range(14)], 1)
    assert (steps - full).abs().max() <= 1e-12 and sorted(cache.layers) == [0, 1, 2]


def test_hybrid_cache_errors_name_the_argument():
    x = torch.randn(1, 4, 16)
    with pytest.raises(ValueError, match="past_key_values.*exact path"):
        st.HybridAttention(16, 2, chunk=4, path="batched")(x, past_key_values=st.SVCache())
    with pytest.raises(TypeError, match="past_key_values"):
        st.HybridAttention(16, 2, chunk=4, path="exact")(x, past_key_values={})
    m, cache = st.HybridAttention(16, 2, chunk=4, path="exact", layer_idx=0), st.SVCache()
    m(x, past_key_values=cache)
    with pytest.raises(ValueError, match="past_key_values: layer 0 holds B=1"):
        m(torch.randn(2, 1, 16), past_key_values=cache)
    other = st.HybridAttention(16, 2, chunk=4, path="exact", layer_idx=0)
    with pytest.raises(ValueError, match="past_key_values: layer 0 .* another HybridAttention"):
        other(x, past_key_values=cache)
    with pytest.raises(ValueError, match="past_key_values: layer 0 .* HybridAttention layer, not"):
        st.SVAttention(16, 2, layer_idx=0)(x, past_key_values=cache)
    sv_cache = st.SVCache()
    st.SVAttention(16, 2, layer_idx=0)(x, past_key_values=sv_cache)
    with pytest.raises(ValueError, match="past_key_values: layer 0 .* SVAttention layer, not"):
        m(x, past_key_values=sv_cache)
    with pytest.raises(ValueError, match="cache: layers \\[0\\] hold HybridAttention"):
        st.certify.forget(cache, (0, 1))


def test_fla_names_and_deprecated_aliases():
    m = st.SVAttention(hidden_size=16, num_heads=2, layer_idx=3)
    assert (m.hidden_size, m.num_heads, m.head_dim, m.layer_idx) == (16, 2, 8, 3)
    assert "Args:" in st.SVAttention.__doc__ and "hidden_size (int)" in st.DeltaNet.__doc__
    for cls in (st.SVAttention, st.HybridAttention, st.SoftmaxAttention, st.SlidingWindowAttention,
                st.LinearAttention, st.DeltaNet):
        with pytest.warns(DeprecationWarning, match="d_model is deprecated, use hidden_size"):
            old = cls(d_model=16, n_heads=2)
        with pytest.warns(DeprecationWarning, match="n_heads is deprecated"):
            assert old.n_heads == 2
        with pytest.raises(TypeError, match="hidden_size or its deprecated alias d_model"):
            cls(hidden_size=16, d_model=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st.HybridAttention(16, 2, chunk=4)  # positional, as before: no warning


def test_bad_arguments_raise_typed_errors_naming_them():
    with pytest.raises(ValueError, match="hidden_size"):
        st.SVAttention(0, 1)
    with pytest.raises(ValueError, match="num_heads"):
        st.SVAttention(16, 3)
    with pytest.raises(ValueError, match="layer_idx"):
        st.SVAttention(16, 2, layer_idx=-1)
    with pytest.raises(ValueError, match="chunk"):
        st.SVAttention(16, 2, chunk=0)
    with pytest.raises(TypeError, match="settings"):
        st.SVAttention(16, 2, settings=svattn.ProblemSettings())
    with pytest.raises(TypeError, match="settings"):
        st.HybridAttention(16, 2, settings=st.ExactSettings())
    with pytest.raises(TypeError, match="overrides"):
        st.HybridAttention(16, 2, chunks=4)
    with pytest.raises(TypeError, match="return_diagnostics"):
        st.SVAttention(16, 2)(torch.randn(1, 3, 16), return_diagnostics=1)
    with pytest.raises(ValueError, match="hidden_states"):
        st.SVAttention(16, 2)(torch.randn(1, 3, 8))
    with pytest.raises(TypeError, match="hidden_states must be a torch.Tensor"):
        st.DeltaNet(16, 2)([[0.0] * 16])


def test_settings_are_packed_once_and_repacked_when_set():
    m = st.SVAttention(16, 2, st.ExactSettings(problem=svattn.ProblemSettings(C=0.3)))
    assert m._packed == (1.0, 0.3, 1e-6, False)
    m.settings = st.BatchedSettings(problem=svattn.ProblemSettings(C=0.5), iterations=50)
    assert m.path == "batched" and m._packed[:5] == (1.0, 0.5, 1e-6, False, 50)
    with pytest.raises(ValueError, match="problem.C"):
        m.settings = st.ExactSettings(problem=svattn.ProblemSettings(C=-1.0))


def test_torchscript_on_torch_1_13():
    x = torch.randn(1, 9, 16)
    mods = modules()
    for name in ("softmax", "swa", "linear", "deltanet"):
        assert torch.allclose(torch.jit.script(mods[name])(x), mods[name](x), atol=1e-6), name
    traced = torch.jit.trace(mods["sv_exact"], (x,), check_trace=False)
    assert torch.allclose(traced(x), mods["sv_exact"](x), atol=1e-6)


class Net(torch.nn.Module):
    def __init__(self, layers=1, C=0.3):
        super().__init__()
        torch.manual_seed(4)
        s = st.ExactSettings(problem=svattn.ProblemSettings(C=C))
        self.emb = torch.nn.Embedding(20, 16)
        self.attn = torch.nn.ModuleList(st.SVAttention(16, 2, s) for _ in range(layers))
        self.out = torch.nn.Linear(16, 20)

    def forward(self, idx):
        x = self.emb(idx)
        for a in self.attn:
            x = x + a(x)
        return self.out(x)


def test_certify_one_layer_equals_never_seen_context():
    model = Net().double()
    ctx = torch.randint(0, 20, (1, 30), generator=torch.Generator().manual_seed(5))
    probe = torch.randint(0, 20, (1, 4), generator=torch.Generator().manual_seed(6))
    r = st.certify.forget_span(model, ctx, (10, 17), queries=probe)
    assert r.ok and r.fully_covered and r.span == (10, 17) and len(r.certificates) == 2
    for c in r.certificates:
        assert c.removed_ids == list(range(10, 17)) and c.remaining == 23 and c.equal
        assert c.removal.verify.ok and c.to_dict()["ok"]
    with torch.no_grad():
        ref = model(torch.cat([ctx[:, :10], ctx[:, 17:], probe], 1))[:, -4:]
        kept = model(torch.cat([ctx, probe], 1))[:, -4:]
    assert (r.outputs - ref).abs().max() <= 1e-6 < (kept - ref).abs().max()


def test_certify_reports_mixed_keys_in_later_layers():
    model = Net(layers=2).double()
    ctx = torch.randint(0, 20, (1, 20), generator=torch.Generator().manual_seed(7))
    r = st.certify.forget_span(model, ctx, (5, 8))
    assert r.ok and not r.fully_covered and r.outputs is None
    first = [c for c in r.certificates if c.layer == 0]
    later = [c for c in r.certificates if c.layer == 1]
    assert all(c.mixed_ids == [] for c in first)
    assert all(c.mixed_ids == list(range(8, 20)) for c in later)
    assert any("earlier layers" in s for s in r.not_covered)


def test_certify_bad_input():
    model = Net()
    ctx = torch.randint(0, 20, (1, 12))
    for span in ((5, 5), (0, 13), (-1, 3), "0:3", (1.0, 2)):
        with pytest.raises(ValueError, match="span must be"):
            st.certify.forget_span(model, ctx, span)
    with pytest.raises(TypeError, match="model"):
        st.certify.build(torch.nn.Sequential(st.SoftmaxAttention(16, 2)), torch.randn(1, 4, 16))
    with pytest.raises(TypeError, match="model"):
        st.certify.build(object(), ctx)
    with pytest.raises(ValueError, match="model: SV layers \\[0\\] use the batched path"):
        st.certify.build(st.SVAttention(16, 2, st.BatchedSettings()), torch.randn(1, 4, 16))
    with pytest.raises(TypeError, match="cache"):
        st.certify.forget({}, (0, 1))
    with pytest.raises(ValueError, match="cache"):
        st.certify.forget(st.SVCache(), (0, 1))


@pytest.mark.parametrize("name", [n for n in modules() if not n.startswith("sv_")]
                         + ["hybrid_no_rope_fixed_gate"])
def test_parity_with_cxx_layer_on_shared_weights(name):
    if name == "hybrid_no_rope_fixed_gate":
        m = st.HybridAttention(16, 2, chunk=4, rope=False, learn_bandwidth=False, gate_override=0.3)
    else:
        m = modules()[name]
    m = m.double()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))  # away from both sides' initialisation
    x = torch.randn(2, 13, 16, dtype=torch.float64)
    ref = st.reference.cxx_forward(m, x)
    assert ref.shape == x.shape and (m(x) - ref).abs().max() <= 1e-6, name


def test_cxx_reference_errors():
    x = torch.randn(1, 5, 16)
    with pytest.raises(TypeError, match="module: SVAttention has no C\\+\\+ layer"):
        st.reference.cxx_forward(st.SVAttention(16, 2), x)
    with pytest.raises(TypeError, match="module"):
        st.reference.cxx_forward(torch.nn.Linear(16, 16), x)
    m = st.LinearAttention(16, 2)
    with pytest.raises(ValueError, match="state: missing 'q_proj.weight'"):
        st.ops.layer_forward("linear", {"hidden_size": 16.0, "num_heads": 2.0}, {}, {}, x)
    with pytest.raises(ValueError, match="config: unknown key 'windows'"):
        st.ops.layer_forward("swa", {"windows": 3.0}, {}, dict(m.state_dict()), x)
    # The hybrid keys are the C++ hybrid table's rows (include/svattn/torch/settings_fields.h).
    h = st.reference.cxx_config(st.HybridAttention(16, 2, chunk=4))
    with pytest.raises(ValueError, match="lipschitz 'wide': expected tangent\\|power\\|gershgorin"):
        st.ops.layer_forward("hybrid", h[1], {**h[2], "lipschitz": "wide"}, {}, x)
    with pytest.raises(ValueError, match="config: unknown key 'problem.C'"):
        st.ops.layer_forward("hybrid", {**h[1], "problem.C": 0.5}, h[2], {}, x)
    with pytest.raises(ValueError, match="config: unknown key 'exact'"):
        st.ops.layer_forward("hybrid", h[1], {**h[2], "exact": "lean"}, {}, x)


def test_certify_span_in_the_chunk_not_yet_in_memory():
    model = Net()
    model.attn[0].chunk = 3
    ctx = torch.randint(0, 20, (1, 20), generator=torch.Generator().manual_seed(8))
    cache = st.certify.build(model, ctx)
    assert cache[0].pending_ids == [18, 19]  # 20 tokens, chunk 3: chunk 6 is still being read
    certs = st.certify.forget(cache, (17, 19))
    assert all(c.ok and c.removed_ids == [17] and c.pending_removed == [18] for c in certs)
    assert cache[0].pending_ids == [19] and len(cache[0].pending_keys) == 1
