"""Functional SV attention (docs/layers.md §1-§8) and the baselines' kernels, on the registered ops."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

import torch

from .. import MemorySettings, ProblemSettings
from ._ops import ops
from .settings import BatchedSettings, ExactSettings

Settings = Union[ExactSettings, BatchedSettings, ProblemSettings, MemorySettings, None]


def _resolve(settings: Settings, path: str) -> Union[ExactSettings, BatchedSettings]:
    if path not in ("exact", "batched"):
        raise ValueError(f"path must be 'exact' or 'batched', got {path!r}")
    if isinstance(settings, (ExactSettings, BatchedSettings)):
        want = ExactSettings if path == "exact" else BatchedSettings
        if not isinstance(settings, want):
            raise TypeError(f"path={path!r} needs {want.__name__}, got {type(settings).__name__}")
        s = settings
    else:
        if isinstance(settings, MemorySettings):
            settings = settings.problem
        if settings is not None and not isinstance(settings, ProblemSettings):
            raise TypeError(f"settings: unsupported type {type(settings).__name__}")
        p = settings if settings is not None else ProblemSettings()
        s = ExactSettings(problem=p) if path == "exact" else BatchedSettings(problem=p)
    s.validate()
    return s


def sv_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, settings: Settings = None,
                 path: str = "exact", log_sigma: Optional[torch.Tensor] = None,
                 chunk: Optional[int] = None, return_info: bool = False
                 ) -> Union[torch.Tensor, Tuple[torch.Tensor, Dict[str, Any]]]:
    """Support-vector attention: every query reads o(q) = sum_i a_i k(q, x_i) v_i / sum_i a_i
    k(q, x_i) over the support of the SVDD fitted to the keys (RBF kernel).

    q [B, H, M, d], k [B, H, N, d], v [B, H, N, dv] -> [B, H, M, dv]. ``settings``: ExactSettings
    (path="exact"), BatchedSettings (path="batched"), or a ProblemSettings/MemorySettings whose
    problem is used with the path's defaults. ``log_sigma`` [H] makes the per-head bandwidth
    differentiable (else problem.bandwidth). Autograd-aware: the exact path's backward reuses the
    bordered inverse of the forward (docs/layers.md §1), the batched path differentiates through its solve.
    With ``chunk`` the memory is causal by chunks (queries of chunk c read chunks 0..c-1; chunk 0
    reads 0; q, k, v must share T). ``return_info`` adds {"support": [B, H] or [B, H, nC], ...}.
    """
    s = _resolve(settings, path)
    out, info = sv_attention_packed(q, k, v, s.pack(), isinstance(s, ExactSettings), log_sigma, chunk)
    if return_info:
        return out, info
    return out


def sv_attention_packed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, packed: Tuple[Any, ...],
                        exact: bool, log_sigma: Optional[torch.Tensor] = None,
                        chunk: Optional[int] = None, log_mass: bool = False
                        ) -> Tuple[torch.Tensor, Dict[str, Any]]:
    """``sv_attention`` on settings already validated and packed by ``ExactSettings.pack()`` or
    ``BatchedSettings.pack()`` (the modules pack theirs once). Returns (out, info); info holds
    tensors and numbers only, nothing is copied to the host. With ``log_mass`` (chunked only)
    info["log_mass"] is the memory's differentiable log total weight
    log sum_{j in S u E} a_j k(q_t, x_j) [B, H, T], -inf where the memory is empty (the hybrid's
    joint gate, docs/layers.md §3)."""
    bandwidth, C, ridge, bounded = packed[:4]
    if log_mass:
        if chunk is None:
            raise ValueError("log_mass needs a chunked memory (chunk >= 1), got chunk=None")
        if exact:
            out, support, lz = ops.exact_chunked_attention_mass(k, v, q, log_sigma, chunk,
                                                                bandwidth, C, ridge, bounded)
            return out, {"support": support, "log_mass": lz}
        out, support, lz, residual, neg = ops.batched_chunked_attention_mass(
            k, v, q, log_sigma, chunk, bounded, bandwidth, C, ridge, *packed[4:])
        return out, {"support": support, "log_mass": lz, "fista_residual": residual,
                     "negative_coefficients": neg}
    if exact:
        if chunk is None:
            out, support = ops.exact_attention(k, v, q, log_sigma, bandwidth, C, ridge)
        else:
            out, support = ops.exact_chunked_attention(k, v, q, log_sigma, chunk, bandwidth, C,
                                                       ridge, bounded)
        return out, {"support": support}
    if chunk is None:
        out, support, residual, neg = ops.batched_attention(k, v, q, log_sigma, bandwidth, C, ridge,
                                                            *packed[4:])
    else:
        out, support, residual, neg = ops.batched_chunked_attention(
            k, v, q, log_sigma, chunk, bounded, bandwidth, C, ridge, *packed[4:])
    return out, {"support": support, "fista_residual": residual, "negative_coefficients": neg}


def causal_softmax_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Full causal softmax attention on [B, H, T, dh], scores q.k / sqrt(dh)."""
    return ops.causal_softmax_attention(q, k, v)


def sliding_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    """Causal softmax over (t - window, t]."""
    return ops.sliding_window_attention(q, k, v, window)


def chunk_local_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int) -> torch.Tensor:
    """Causal softmax inside chunks of length ``chunk`` (the hybrid's local path)."""
    return ops.chunk_local_attention(q, k, v, chunk)


def memory_local_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int,
                           window: int, return_log_normalizer: bool = False
                           ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """The hybrid's local path (docs/layers.md §3): query t attends to the keys s with
    b(t) <= s <= t, b(t) = chunk * floor(max(t - window + 1, 0) / chunk) (at least the last
    ``window`` tokens). ``window=1`` is chunk_local_attention, ``chunk=1`` sliding_window_attention.
    ``return_log_normalizer`` adds logsumexp_s q_t.k_s / sqrt(dh) over those keys, [B, H, T]."""
    out, lz = ops.memory_local_attention(q, k, v, chunk, window, return_log_normalizer)
    return (out, lz) if return_log_normalizer else out


def linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int = 64) -> torch.Tensor:
    """Causal linear attention with phi = elu + 1, chunkwise."""
    return ops.linear_attention(q, k, v, chunk)


def delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, chunk: int = 64) -> torch.Tensor:
    """DeltaNet's delta rule, chunkwise WY form; beta [B, H, T] in (0, 1)."""
    return ops.delta_rule(q, k, v, beta, chunk)


def apply_rope(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding of x [B, H, T, dh] at positions 0..T-1."""
    return ops.apply_rope(x, base)
