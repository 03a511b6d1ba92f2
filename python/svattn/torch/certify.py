"""Certified forgetting of a span of context in a model whose attention layers are ``SVAttention``
on the exact path (docs/python.md "Certified forgetting"): (a) ``build`` runs the model on the
context and keeps each layer's memories (one core ``svattn.Memory`` per layer, batch row and head),
(b) ``forget`` removes the span's tokens from every memory, (c) each memory gets a certificate that
its state equals the batch solve of the remaining tokens, never having seen the span (equal
``state_sha256``), with the core's removal certificate (KKT check of the state after removal).

What the certificate does not cover is reported with it: keys and values of tokens after the span
in the second and later SV layers were computed from activations that read the span in earlier
layers (``MemoryCertificate.mixed_ids``); attention outside ``SVAttention`` (a softmax or local
path, a convolution) is not a memory this module can forget from, so such models are refused.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from .. import Memory, RemovalCertificate, removal_certificate, solve
from .cache import HybridLayerState, SVCache, bind_cache
from .modules import (DeltaNet, HybridAttention, LinearAttention, SlidingWindowAttention,
                      SoftmaxAttention, SVAttention)

_UNCERTIFIABLE = (HybridAttention, SoftmaxAttention, SlidingWindowAttention, LinearAttention,
                  DeltaNet)

NOT_COVERED = (
    "keys and values of tokens after the span in the second and later SV layers were computed from "
    "activations that read the span in earlier layers (mixed_ids); the certificate states that the "
    "memory equals one that never held the span's tokens, not that these tokens' activations equal "
    "those of a run on the context without the span",
    "attention outside SVAttention on the exact path (softmax, sliding-window or local paths, "
    "HybridAttention's local path, token mixing in the user's own layers) holds no certifiable "
    "memory; models with svattn's other attention modules are refused, custom mixing is not seen",
)


@dataclass
class MemoryCertificate:
    """Certificate of one memory (layer, batch row, head) after forgetting the span."""

    layer: int
    batch: int
    head: int
    removed_ids: List[int]          # span positions removed from the memory
    pending_removed: List[int]      # span positions dropped from the chunk not yet in the memory
    remaining: int                  # tokens the memory holds after forgetting
    state_sha256: str               # the memory after forgetting
    never_seen_sha256: str          # batch solve of the remaining tokens (same ids, keys, values)
    removal: Optional[RemovalCertificate]  # the core's certificate; None when nothing was removed
    mixed_ids: List[int] = field(default_factory=list)  # remaining ids whose keys saw the span

    @property
    def equal(self) -> bool:
        return self.state_sha256 == self.never_seen_sha256

    @property
    def ok(self) -> bool:
        return self.equal and (self.removal is None or self.removal.verify.ok)

    def to_dict(self) -> Dict[str, Any]:
        return {"layer": self.layer, "batch": self.batch, "head": self.head,
                "removed_ids": self.removed_ids, "pending_removed": self.pending_removed,
                "remaining": self.remaining, "state_sha256": self.state_sha256,
                "never_seen_sha256": self.never_seen_sha256, "equal": self.equal, "ok": self.ok,
                "removal": None if self.removal is None else self.removal.to_dict(),
                "mixed_ids": self.mixed_ids}


@dataclass
class CertifiedForgetting:
    """Result of ``forget_span``: the outputs on ``queries`` read from the forgotten memories, one
    certificate per memory, the cache (reusable for further decoding) and what is not covered."""

    outputs: Any
    certificates: List[MemoryCertificate]
    cache: SVCache
    span: Tuple[int, int]
    not_covered: Tuple[str, ...] = NOT_COVERED

    @property
    def ok(self) -> bool:
        return bool(self.certificates) and all(c.ok for c in self.certificates)

    @property
    def fully_covered(self) -> bool:
        """True when no remaining key was computed from activations that read the span."""
        return not any(c.mixed_ids for c in self.certificates)


def _check_model(model: nn.Module) -> List[SVAttention]:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    bad = [type(m).__name__ for m in model.modules() if isinstance(m, _UNCERTIFIABLE)]
    if bad:
        raise TypeError(f"model: holds {', '.join(sorted(set(bad)))}, whose attention is not an SV "
                        "memory; certify needs every attention layer to be SVAttention")
    layers = [m for m in model.modules() if isinstance(m, SVAttention)]
    if not layers:
        raise TypeError(f"model: {type(model).__name__} holds no svattn.torch.SVAttention layer")
    batched = [i for i, m in enumerate(layers) if m.path != "exact"]
    if batched:
        raise ValueError(f"model: SV layers {batched} use the batched path; certify needs "
                         "ExactSettings (the batched path's memory is not the exact solution)")
    return layers


def _default_forward(model: nn.Module, x: Any) -> Any:
    return model(x)


def build(model: nn.Module, context: Any,
          forward: Optional[Callable[[nn.Module, Any], Any]] = None) -> SVCache:
    """(a) Runs ``forward(model, context)`` (default ``model(context)``) without gradients with an
    ``SVCache`` bound to every SV layer, and returns the cache holding each layer's memories."""
    _check_model(model)
    cache = SVCache()
    with torch.no_grad(), bind_cache(model, cache):
        (forward or _default_forward)(model, context)
    return cache


def _span(span: Any, seen: int) -> Tuple[int, int]:
    ok = (isinstance(span, (tuple, list)) and len(span) == 2
          and all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in span))
    if not ok or not (0 <= span[0] < span[1] <= seen):
        raise ValueError(f"span must be (start, stop) with 0 <= start < stop <= {seen} "
                         f"(the context's length), got {span!r}")
    return int(span[0]), int(span[1])


def _certify_memory(mem: Memory, span: Tuple[int, int]) -> Tuple[List[int], Optional[RemovalCertificate]]:
    ids = mem.tokens()[0]
    gone = [int(i) for i in ids if span[0] <= i < span[1]]
    if not gone:
        return gone, None
    before = mem.state()
    diag = mem.remove_batch(gone)
    return gone, removal_certificate(before, mem, gone, diagnostics=diag)


def forget(cache: SVCache, span: Any) -> List[MemoryCertificate]:
    """(b, c) Removes the context positions ``span = (start, stop)`` from every memory of
    ``cache`` (and from the chunk not yet in a memory), and certifies each memory."""
    if not isinstance(cache, SVCache):
        raise TypeError(f"cache must be an svattn.torch.SVCache, got {type(cache).__name__}")
    if not cache.layers:
        raise ValueError("cache: holds no layer (run build first)")
    hybrid = sorted(i for i, st in cache.layers.items() if isinstance(st, HybridLayerState))
    if hybrid:
        raise ValueError(f"cache: layers {hybrid} hold HybridAttention states, which certify does "
                         f"not cover (their local path keeps the span)")
    span = _span(span, min(st.seen for st in cache.layers.values()))
    certs: List[MemoryCertificate] = []
    for order, (index, st) in enumerate(cache.layers.items()):
        if st.seen % st.chunk == 0:
            st.flush()  # a complete chunk: its keys are what the next token reads
        keep = [j for j, i in enumerate(st.pending_ids) if not span[0] <= i < span[1]]
        dropped = [i for i in st.pending_ids if span[0] <= i < span[1]]
        st.pending_ids = [st.pending_ids[j] for j in keep]
        st.pending_keys = [st.pending_keys[j] for j in keep]
        st.pending_values = [st.pending_values[j] for j in keep]
        for b in range(st.batch):
            for h in range(st.heads):
                mem = st.memories[b][h]
                gone, cert = _certify_memory(mem, span)
                ids, keys, values = mem.tokens()
                ref = solve(keys, mem.settings, values=values, ids=ids).state.state_sha256
                mixed = [int(i) for i in ids if i >= span[1]] if order > 0 else []
                certs.append(MemoryCertificate(index, b, h, gone, dropped, len(ids),
                                               mem.state_sha256, ref, cert, mixed))
    return certs


def forget_span(model: nn.Module, context: Any, span: Sequence[int], queries: Any = None,
                forward: Optional[Callable[[nn.Module, Any], Any]] = None) -> CertifiedForgetting:
    """Builds the memories of ``model`` on ``context``, forgets ``span`` and, when ``queries`` (the
    input that continues the context) is given, runs ``forward(model, queries)`` reading the
    forgotten memories. Returns the outputs, one certificate per memory and what is not covered."""
    cache = build(model, context, forward)
    certs = forget(cache, span)
    outputs = None
    if queries is not None:
        with torch.no_grad(), bind_cache(model, cache):
            outputs = (forward or _default_forward)(model, queries)
    return CertifiedForgetting(outputs, certs, cache, (int(span[0]), int(span[1])))
