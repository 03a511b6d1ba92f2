"""Loads the TORCH_LIBRARY op library (_torch_ops.so, built from src/torch) into torch.ops.svattn."""
from __future__ import annotations

import os

import torch

_LIB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_torch_ops.so")
if not os.path.exists(_LIB):  # pragma: no cover - builds without LibTorch
    raise ImportError(f"svattn.torch: {_LIB} is missing (svattn was built with SVATTN_WITH_TORCH=OFF)")
torch.ops.load_library(_LIB)

ops = torch.ops.svattn
"""The registered ops: exact_attention, exact_chunked_attention, exact_chunked_attention_mass,
batched_attention, batched_chunked_attention, batched_chunked_attention_mass,
causal_softmax_attention, sliding_window_attention, chunk_local_attention, memory_local_attention,
linear_attention, delta_rule, apply_rope, layer_forward, layer_certify, settings_fields."""
