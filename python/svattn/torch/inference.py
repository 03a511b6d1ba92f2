"""Certified inference on a trained model (docs/python.md "Certified inference"): each
``HybridAttention`` layer of a model runs, on the hidden states the model feeds it, through its C++
twin on the exact path, with every memory's state checked by the independent verifier and (with
``agreement``) solved on the batched path as well. Per layer: the support sizes, the share of
memories whose certificate verifies and the batched/exact partition agreement -- what
``svattn-torch eval --global-path exact --certify --check-agreement`` reports for a checkpoint of
the C++ trainer.

The certificate of a memory says that its coefficients and partition are the optimum of the
one-class SVDD on that memory's keys (KKT conditions checked in fp64 by the verifier, docs/math.md
§7). It does not say that the model's output is unchanged by anything, and it covers the memory
only: the local path and the gate are ordinary softmax and linear maps.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

import torch
from torch import nn

from ._ops import ops
from .modules import HybridAttention
from .reference import cxx_config


@dataclass
class LayerCertificate:
    """One HybridAttention layer: its memories (batch rows x heads x chunks >= 1) on the exact
    path, checked by the verifier."""

    layer: int                      # index among the model's HybridAttention modules
    name: str                       # the module's name in the model
    support_per_head: List[float]   # mean |S u E| per head over batch rows and chunks >= 1
    support_mean: float
    gate_mean: float                # mean memory share of the gate (chunks >= 1)
    certified: int                  # memories the verifier checked
    verified: int                   # of those, memories it accepted
    partition_agreement: Optional[float] = None  # batched vs exact (agreement=True)
    agreement_units: int = 0
    coefficient_error: Optional[float] = None    # max |alpha_batched - alpha_exact|

    @property
    def verified_share(self) -> float:
        return self.verified / self.certified if self.certified else math.nan

    @property
    def ok(self) -> bool:
        return self.certified > 0 and self.verified == self.certified


@dataclass
class InferenceCertificate:
    """Every HybridAttention layer of the model, in module order."""

    layers: List[LayerCertificate] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every memory of every layer verified."""
        return bool(self.layers) and all(layer.ok for layer in self.layers)

    def to_dict(self) -> Dict[str, Any]:
        return {"ok": self.ok,
                "layers": [dict(asdict(layer), verified_share=layer.verified_share)
                           for layer in self.layers]}


def _layer_certificate(index: int, name: str, module: HybridAttention, x: torch.Tensor,
                       agreement: bool) -> LayerCertificate:
    _, numbers, texts = cxx_config(module)
    state = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    d = ops.layer_certify(numbers, texts, state, x.detach().cpu(), agreement)
    heads = [d[f"support_head_{h}"] for h in range(module.num_heads) if f"support_head_{h}" in d]
    return LayerCertificate(
        layer=index, name=name, support_per_head=heads, support_mean=d["support_mean"],
        gate_mean=d["gate_mean"], certified=int(d["certified_units"]),
        verified=int(d["verified_units"]),
        partition_agreement=d["partition_agreement"] if agreement else None,
        agreement_units=int(d["agreement_units"]) if agreement else 0,
        coefficient_error=d["coefficient_error"] if agreement else None)


def certify_inference(model: nn.Module, *args: Any, agreement: bool = True,
                      **kwargs: Any) -> InferenceCertificate:
    """Runs ``model(*args, **kwargs)`` once without gradient, keeping the hidden states each
    ``HybridAttention`` layer receives (its first positional argument), then certifies every such
    layer on them (module docstring). Whatever path a layer trains on, the certificate is of its
    exact-path memories; the model's own output is not changed. Raises ValueError when the model
    has no HybridAttention layer or a layer was not called."""
    hybrids = [(n, m) for n, m in model.named_modules() if isinstance(m, HybridAttention)]
    if not hybrids:
        raise ValueError("model: no HybridAttention layer to certify")
    seen: Dict[str, torch.Tensor] = {}

    def keep(name: str):
        def hook(_module: nn.Module, inputs: tuple) -> None:
            if not inputs or not isinstance(inputs[0], torch.Tensor):
                raise ValueError(f"{name}: certify_inference needs the hidden states as the "
                                 "layer's first positional argument")
            seen[name] = inputs[0].detach()
        return hook

    handles = [m.register_forward_pre_hook(keep(n)) for n, m in hybrids]
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    finally:
        for h in handles:
            h.remove()
    missing = [n for n, _ in hybrids if n not in seen]
    if missing:
        raise ValueError(f"model: HybridAttention layers {missing} were not called by forward")
    return InferenceCertificate([_layer_certificate(i, n, m, seen[n], agreement)
                                 for i, (n, m) in enumerate(hybrids)])
