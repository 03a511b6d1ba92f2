"""Certified inference on a model's hybrid layers (docs/python.md "Certified inference"): every
memory of every HybridAttention layer checked by the verifier on the exact path, the counts of
memories exact, the batched/exact agreement reported, and models without a hybrid layer refused."""
import math
import os

import pytest

pytestmark = pytest.mark.torch
if os.environ.get("SVATTN_REQUIRE_TORCH"):
    import torch
    import svattn.torch as st
else:
    torch = pytest.importorskip("torch")
    st = pytest.importorskip("svattn.torch")

import svattn  # noqa: E402

D, H, CHUNK, T, B = 16, 2, 8, 40, 2


class TwoHybrids(torch.nn.Module):
    def __init__(self, **options):
        super().__init__()
        torch.manual_seed(3)
        p = svattn.ProblemSettings(C=0.25)
        self.embed = torch.nn.Linear(4, D)
        self.first = st.HybridAttention(D, H, problem=p, chunk=CHUNK, **options)
        self.second = st.HybridAttention(D, H, problem=p, chunk=CHUNK, **options)

    def forward(self, x):
        h = self.embed(x)
        h = h + self.first(h)
        return h + self.second(h)


def inputs():
    torch.manual_seed(11)
    return torch.randn(B, T, 4)


@pytest.mark.parametrize("path", ["exact", "batched"])
def test_every_memory_of_every_hybrid_layer_verifies(path):
    model = TwoHybrids(path=path)
    cert = st.certify_inference(model, inputs())
    assert [c.name for c in cert.layers] == ["first", "second"]
    memories = B * H * (T // CHUNK - 1)  # one memory per row, head and chunk >= 1
    for layer in cert.layers:
        assert layer.certified == memories
        assert layer.verified == memories and layer.ok
        assert layer.verified_share == 1.0
        assert len(layer.support_per_head) == H
        assert 4 <= layer.support_mean <= T  # |S u E| >= 1/C = 4
        assert 0 <= layer.partition_agreement <= 1
        assert layer.agreement_units == memories
        assert math.isfinite(layer.coefficient_error)
    assert cert.ok and cert.to_dict()["ok"]


def test_the_layers_see_the_hidden_states_the_model_feeds_them():
    # The second layer's input depends on the first: certifying it on the embedding alone would
    # give other supports. Same weights, same input, same report; another input, another report.
    model = TwoHybrids(path="exact")
    a = st.certify_inference(model, inputs(), agreement=False)
    b = st.certify_inference(model, inputs(), agreement=False)
    assert a.to_dict() == b.to_dict()
    assert a.layers[1].partition_agreement is None
    c = st.certify_inference(model, 3 * inputs(), agreement=False)
    assert c.layers[1].support_per_head != a.layers[1].support_per_head


def test_a_model_without_a_hybrid_layer_is_refused():
    model = torch.nn.Sequential(torch.nn.Linear(4, D), st.SoftmaxAttention(D, H))
    with pytest.raises(ValueError, match="no HybridAttention"):
        st.certify_inference(model, inputs())


def test_a_hybrid_layer_the_forward_never_calls_is_named():
    model = TwoHybrids(path="exact")
    model.forward = lambda x: model.first(model.embed(x))
    with pytest.raises(ValueError, match="second"):
        st.certify_inference(model, inputs())
