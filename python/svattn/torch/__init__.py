"""svattn.torch: SV attention for PyTorch (docs/python.md "Torch").

``sv_attention(q, k, v, settings, path="exact"|"batched")`` is the autograd-aware op; the modules
``SVAttention``, ``HybridAttention`` and the baselines ``SoftmaxAttention``,
``SlidingWindowAttention``, ``LinearAttention``, ``DeltaNet`` share one interface
(hidden_states [B, T, hidden_size] -> [B, T, hidden_size], causal); ``SVCache`` carries the exact
memories across calls; ``certify`` forgets a span of context with a certificate per memory;
``certify_inference`` checks every memory of a model's hybrid layers on the exact path;
``settings_fields(table)`` lists a C++ settings field table. Loads the op library built from
src/torch.
"""
from ._ops import ops  # noqa: F401  (loads the op library)
from .functional import (apply_rope, causal_softmax_attention, chunk_local_attention, delta_rule,
                         linear_attention, memory_local_attention, sliding_window_attention,
                         sv_attention)
from .cache import SVCache, SVLayerState, bind_cache
from .modules import (DeltaNet, HybridAttention, LinearAttention, SlidingWindowAttention,
                      SoftmaxAttention, SVAttention, param_groups, record_diagnostics)
from . import certify, reference  # noqa: E402
from .inference import InferenceCertificate, LayerCertificate, certify_inference
from .settings import BatchedSettings, ExactSettings, HybridSettings, settings_fields

__all__ = [
    "BatchedSettings", "DeltaNet", "InferenceCertificate", "LayerCertificate", "SVCache", "SVLayerState", "bind_cache", "certify", "reference",
    "record_diagnostics", "ExactSettings", "HybridAttention", "HybridSettings",
    "LinearAttention", "SVAttention", "SlidingWindowAttention", "SoftmaxAttention", "apply_rope",
    "causal_softmax_attention", "certify_inference", "chunk_local_attention", "delta_rule", "linear_attention", "param_groups",
    "memory_local_attention", "settings_fields", "sliding_window_attention", "sv_attention",
]
