"""svattn.torch: SV attention for PyTorch (docs/python.md "Torch").

``sv_attention(q, k, v, settings, path="exact"|"batched")`` is the autograd-aware op; the modules
``SVAttention``, ``HybridAttention`` and the baselines ``SoftmaxAttention``,
``SlidingWindowAttention``, ``LinearAttention``, ``DeltaNet`` share one interface
(x [B, T, d_model] -> [B, T, d_model], causal). Loads the op library built from src/torch.
"""
from ._ops import ops  # noqa: F401  (loads the op library)
from .functional import (apply_rope, causal_softmax_attention, chunk_local_attention, delta_rule,
                         linear_attention, sliding_window_attention, sv_attention)
from .modules import (DeltaNet, HybridAttention, LinearAttention, SlidingWindowAttention,
                      SoftmaxAttention, SVAttention)
from .settings import BatchedSettings, ExactSettings, HybridSettings

__all__ = [
    "BatchedSettings", "DeltaNet", "ExactSettings", "HybridAttention", "HybridSettings",
    "LinearAttention", "SVAttention", "SlidingWindowAttention", "SoftmaxAttention", "apply_rope",
    "causal_softmax_attention", "chunk_local_attention", "delta_rule", "linear_attention",
    "sliding_window_attention", "sv_attention",
]
