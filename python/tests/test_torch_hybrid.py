"""HybridAttention's local path and gate options (docs/layers.md §3, docs/python.md "Modules"):
parity with the C++ layer on shared weights, the window mode's memory boundary, the joint gate's
single normalisation, the memory-off ablation, validation, and no weight decay on the gates."""
import math
import os

import numpy as np
import pytest

pytestmark = pytest.mark.torch
if os.environ.get("SVATTN_REQUIRE_TORCH"):
    import torch
    import svattn.torch as st
else:
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("svattn.torch")

import svattn  # noqa: E402

D, H = 16, 2
P = svattn.ProblemSettings(C=0.25)

OPTIONS = {
    "window_chunk_gate": dict(local="window", local_window=3, chunk=4),
    "window_token_gate_exact": dict(local="window", local_window=5, chunk=3, gate="token",
                                    path="exact"),
    "window_position_gate": dict(local="window", local_window=3, chunk=4, gate="position"),
    "chunk_position_gate_exact": dict(chunk=4, gate="position", path="exact"),
    "joint_exact": dict(chunk=4, gate="joint", path="exact"),
    "joint_window_batched": dict(local="window", local_window=3, chunk=4, gate="joint"),
    "memory_off_chunk": dict(chunk=4, memory=False),
    "memory_off_window": dict(local="window", local_window=3, chunk=4, memory=False),
}


def hybrid(seed=0, **options):
    torch.manual_seed(seed)
    m = st.HybridAttention(D, H, problem=P, **options).double()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.1 * torch.randn_like(p))  # away from both sides' initialisation
    return m


@pytest.mark.parametrize("name", list(OPTIONS))
def test_parity_with_cxx_layer(name):
    m = hybrid(**OPTIONS[name])
    x = torch.randn(2, 17, D, dtype=torch.float64)
    ref = st.reference.cxx_forward(m, x)
    assert ref.shape == x.shape and (m(x) - ref).abs().max() <= 1e-6, name


def test_position_gate_has_a_learned_table_per_head_and_position():
    m = st.HybridAttention(D, H, chunk=4, gate="position")
    assert tuple(m.gate_position.shape) == (H, 4) and m.gate_position.requires_grad
    assert "gate_position" not in dict(st.HybridAttention(D, H, chunk=4).named_parameters())
    x = torch.randn(1, 12, D)
    m(x).sum().backward()
    assert m.gate_position.grad is not None and m.gate_position.grad.abs().sum() > 0


def test_memory_boundary_and_local_width():
    s = st.HybridSettings(chunk=4, local="window", local_window=3)
    assert [s.memory_boundary(t) for t in range(12)] == [0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8]
    assert s.local_width() == 6 and st.HybridSettings(chunk=4).local_width() == 4
    assert [st.HybridSettings(chunk=4).memory_boundary(t) for t in (3, 4, 9)] == [0, 4, 8]


def test_window_memory_holds_exactly_the_tokens_older_than_the_local_path():
    # With the gate fixed at 1 the output of a token t with a memory is the memory's readout: it
    # moves with every token s < b(t) (4 tokens at C = 1/4: each is an error vector, a = 1/4) and
    # never with a token b(t) <= s < t, which the local path holds.
    m = hybrid(local="window", local_window=3, chunk=4, path="exact", gate_override=1.0)
    x = torch.randn(1, 14, D, dtype=torch.float64)
    t = 9
    b = m.settings.memory_boundary(t)
    assert b == 4
    with torch.no_grad():
        base = m(x)[0, t]
        for pos in range(t):
            y = x.clone()
            y[0, pos] += 0.5
            moved = (m(y)[0, t] - base).abs().max().item()
            if pos < b:
                assert moved > 1e-6, pos
            else:
                assert moved == 0.0, pos


def dense_local(q, k, v, s):
    """Masked softmax over b(t) <= u <= t, and its logsumexp (the reference of the local path)."""
    T = q.size(2)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
    t = torch.arange(T).view(T, 1)
    u = torch.arange(T).view(1, T)
    b = torch.tensor([s.memory_boundary(i) for i in range(T)]).view(T, 1)
    scores = scores.masked_fill(~((u <= t) & (u >= b)), -math.inf)
    return torch.softmax(scores, -1) @ v, torch.logsumexp(scores, -1)


def test_window_local_path_against_a_dense_reference():
    s = st.HybridSettings(chunk=4, local="window", local_window=3)
    q, k, v = (torch.randn(2, 2, 15, 8, dtype=torch.float64) for _ in range(3))
    o, lz = st.memory_local_attention(q, k, v, s.chunk, s.min_local(), return_log_normalizer=True)
    o_ref, lz_ref = dense_local(q, k, v, s)
    assert (o - o_ref).abs().max() <= 1e-10 and (lz - lz_ref).abs().max() <= 1e-10


def test_memory_off_equals_the_local_softmax_model():
    x = torch.randn(2, 17, D, dtype=torch.float64)
    # Chunk mode: the chunk-local softmax model, bit for bit.
    m = hybrid(chunk=4, memory=False)
    q, k, v = m._heads(x)
    q, k = st.apply_rope(q, 10000.0), st.apply_rope(k, 10000.0)
    assert torch.equal(m(x), m._merge(st.chunk_local_attention(q, k, v, 4)))
    assert torch.equal(m.last_gate, torch.zeros(2, H, 17, dtype=torch.float64))
    # Window mode with chunk 1: the sliding-window softmax model on the same projections.
    w = hybrid(chunk=1, local="window", local_window=5, memory=False)
    swa = st.SlidingWindowAttention(D, H, window=5).double()
    swa.load_state_dict({k: v for k, v in w.state_dict().items() if k.endswith("proj.weight")
                         and not k.startswith("gate")})
    assert (w(x) - swa(x)).abs().max() <= 1e-12
    # The memory-on layer differs: the ablation switches something off.
    on = hybrid(chunk=4)
    on.load_state_dict(m.state_dict())
    assert (on(x) - m(x)).abs().max() > 1e-6


@pytest.mark.parametrize("local", ["chunk", "window"])
def test_joint_gate_is_one_softmax_over_memory_and_local_weights(local):
    m = hybrid(chunk=4, gate="joint", path="exact", local=local, local_window=3)
    s = m.settings
    x = torch.randn(1, 15, D, dtype=torch.float64)
    with torch.no_grad():
        out = m(x)
        q, k, v = m._heads(x)
        ql, kl = st.apply_rope(q, s.rope_base), st.apply_rope(k, s.rope_base)
        qn, kn = torch.nn.functional.normalize(q, dim=-1), torch.nn.functional.normalize(k, dim=-1)
    _, lz_loc = dense_local(ql, kl, v, s)
    scores = ql @ kl.transpose(-1, -2) / math.sqrt(ql.size(-1))
    mix = torch.zeros_like(v)
    for h in range(H):
        sigma = math.exp(m.log_sigma[h].item())
        for t in range(15):
            b = s.memory_boundary(t)
            w_loc = torch.exp(scores[0, h, t, b:t + 1])  # the local weights, unnormalised
            num, den = w_loc @ v[0, h, b:t + 1], w_loc.sum()
            g_ref = 0.0
            if b > 0:
                mem = svattn.Memory(m._path_settings.memory_settings(sigma), q.size(-1),
                                    v.size(-1))
                mem.add_batch(np.arange(b), kn[0, h, :b].numpy(), v[0, h, :b].numpy())
                st_ = mem.state()
                a = torch.zeros(b, dtype=torch.float64)
                a[torch.from_numpy(st_.ids)] = torch.from_numpy(st_.alpha)
                kern = torch.exp(-((qn[0, h, t] - kn[0, h, :b]) ** 2).sum(-1) / sigma ** 2)
                w_mem = math.exp(m.gate_bias[h].item()) * a * kern  # the memory weights
                num, den = num + w_mem @ v[0, h, :b], den + w_mem.sum()
                g_ref = (w_mem.sum() / den).item()
                # memory share + local share = 1, and the local share is Z_loc / Z
                assert abs(g_ref + (w_loc.sum() / den).item() - 1) <= 1e-12
                assert abs(math.log(w_loc.sum().item()) - lz_loc[0, h, t].item()) <= 1e-10
            assert abs(m.last_gate[0, h, t].item() - g_ref) <= 1e-8, (h, t)
            mix[0, h, t] = num / den
    assert (out - m._merge(mix)).abs().max() <= 1e-8


def test_bad_local_and_gate_settings_name_the_field():
    for kw, field in ((dict(local="sliding"), "hybrid.local"),
                      (dict(local_window=0), "hybrid.local_window"),
                      (dict(gate="mixed"), "hybrid.gate"), (dict(memory=1), "hybrid.memory")):
        with pytest.raises(ValueError, match=field + " must be"):
            st.HybridAttention(D, H, **kw)


def test_param_groups_keep_weight_decay_off_the_gates():
    m = torch.nn.Sequential(st.HybridAttention(D, H, chunk=4, gate="position"),
                            st.HybridAttention(D, H, chunk=4))
    groups = st.param_groups(m, weight_decay=0.1)
    gate_names = {n for n, _ in m.named_parameters() if n.split(".")[1].startswith("gate")}
    by_id = {id(p): n for n, p in m.named_parameters()}
    assert {by_id[id(p)] for p in groups[1]["params"]} == gate_names and len(gate_names) == 5
    assert groups[1]["weight_decay"] == 0.0 and groups[0]["weight_decay"] == 0.1
    with torch.no_grad():
        for p in m.parameters():
            p.fill_(0.5)
    opt = torch.optim.AdamW(groups, lr=0.1)
    for p in m.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()  # zero gradients: only decay moves a parameter
    for n, p in m.named_parameters():
        assert torch.all(p == 0.5) == (n in gate_names), n
    with pytest.raises(ValueError, match="weight_decay must be finite and >= 0"):
        st.param_groups(m, weight_decay=-1.0)
