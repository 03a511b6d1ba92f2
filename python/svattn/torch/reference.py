"""The C++ layer of a Python module (include/svattn/torch/attention.h, op ``svattn::layer_forward``)
on the module's own weights: the parity reference of the modules, and a way to run Python-trained
weights through the C++ layer (docs/python.md "Parity with the C++ layers")."""
from __future__ import annotations

from typing import Dict, Tuple

import torch
from torch import nn

from ._ops import ops
from .modules import (DeltaNet, HybridAttention, LinearAttention, SlidingWindowAttention,
                      SoftmaxAttention, SVAttention)


def _hybrid(m: HybridAttention) -> Tuple[Dict[str, float], Dict[str, str]]:
    s, b = m.settings, m.settings.batched
    numbers = {"chunk": s.chunk, "C": s.problem.C, "bandwidth": s.problem.bandwidth,
               "ridge": s.problem.ridge, "learn_bandwidth": s.learn_bandwidth,
               "normalize_keys": s.normalize_keys, "bounded": s.bounded,
               "gate_bias_init": s.gate_bias_init, "rope": s.rope, "rope_base": s.rope_base,
               "local_window": s.local_window, "memory": s.memory,
               "iterations": b.iterations, "solve_ridge": b.solve_ridge, "mask_tol": b.mask_tol,
               "power_iterations": b.power_iterations, "bisections": b.bisections,
               "active_set_rounds": b.active_set_rounds, "ipm_iterations": b.ipm_iterations,
               "fp64": b.fp64}
    if s.gate_override is not None:
        numbers["gate_override"] = s.gate_override
    return numbers, {"path": s.path, "gate": s.gate, "local": s.local, "lipschitz": b.lipschitz}


def cxx_config(module: nn.Module) -> Tuple[str, Dict[str, float], Dict[str, str]]:
    """(type, numbers, texts) of the C++ AttentionConfig equivalent to ``module``."""
    if isinstance(module, SVAttention):
        raise TypeError("module: SVAttention has no C++ layer (its reference is the op, "
                        "svattn.torch.sv_attention)")
    numbers: Dict[str, float] = {}
    texts: Dict[str, str] = {}
    if isinstance(module, SlidingWindowAttention):
        kind, numbers = "swa", {"window": module.window, "rope": module.rope,
                                "rope_base": module.rope_base}
    elif isinstance(module, SoftmaxAttention):
        kind, numbers = "softmax", {"rope": module.rope, "rope_base": module.rope_base}
    elif isinstance(module, (LinearAttention, DeltaNet)):
        kind = "linear" if isinstance(module, LinearAttention) else "deltanet"
        numbers = {"scan_chunk": module.scan_chunk, "rope": False}
    elif isinstance(module, HybridAttention):
        kind = "hybrid"
        numbers, texts = _hybrid(module)
    else:
        raise TypeError(f"module: expected an svattn.torch attention module, got "
                        f"{type(module).__name__}")
    numbers.update({"hidden_size": module.hidden_size, "num_heads": module.num_heads})
    return kind, {k: float(v) for k, v in numbers.items()}, texts


def cxx_forward(module: nn.Module, hidden_states: torch.Tensor) -> torch.Tensor:
    """The C++ layer configured like ``module``, loaded with its ``state_dict()``, run on
    ``hidden_states`` (no gradient)."""
    kind, numbers, texts = cxx_config(module)
    state = {k: v.detach() for k, v in module.state_dict().items()}
    return ops.layer_forward(kind, numbers, texts, state, hidden_states)
