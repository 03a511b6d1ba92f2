"""Incremental decoding state of ``SVAttention`` and ``HybridAttention`` on the exact path
(docs/python.md "Incremental decoding"): per layer, one exact core memory per (batch, head) holding
the keys already read, so a generation step adds its token to the memory instead of re-solving the
prefix (the hybrid adds its local path's keys and its gate's state, ``HybridLayerState``).

The memories are built exactly as the exact op builds them (src/torch/exact.cpp): token ids are
positions, the keys of chunk c enter with one ``add_batch`` when chunk c + 1 begins (with
``bounded``, followed by ``evict_reserve``), and the queries of chunk c read the memory of chunks
0..c-1 (chunk 0 reads 0). Step-by-step decoding therefore equals the full forward.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

import numpy as np
import torch
from torch import nn

from .. import Memory, MemorySettings


class SVLayerState:
    """One layer's memory: ``memories[b][h]`` (``svattn.Memory``), the keys of the chunk being
    read (``pending_*``, entering the memory at the next chunk boundary) and ``seen`` tokens."""

    def __init__(self, batch: int, heads: int, dim: int, value_dim: int, chunk: int,
                 bounded: bool, settings: List[MemorySettings]) -> None:
        self.batch, self.heads, self.dim, self.value_dim = batch, heads, dim, value_dim
        self.chunk, self.bounded, self.settings = chunk, bounded, settings
        self.memories = [[Memory(settings[h], dim, value_dim) for h in range(heads)]
                         for _ in range(batch)]
        self.pending_ids: List[int] = []
        self.pending_keys: List[np.ndarray] = []    # each [B, H, d]
        self.pending_values: List[np.ndarray] = []  # each [B, H, dv]
        self.seen = 0

    def flush(self) -> None:
        """Adds the pending keys to the memories (done at each chunk boundary)."""
        if not self.pending_ids:
            return
        ids = np.asarray(self.pending_ids, dtype=np.int64)
        keys, values = np.stack(self.pending_keys, 2), np.stack(self.pending_values, 2)
        for b in range(self.batch):
            for h in range(self.heads):
                m = self.memories[b][h]
                m.add_batch(ids, keys[b, h], values[b, h])
                if self.bounded:
                    m.evict_reserve()
        self.pending_ids, self.pending_keys, self.pending_values = [], [], []

    def step(self, q: np.ndarray, k: np.ndarray, v: np.ndarray,
             sigmas: Optional[List[float]] = None) -> Any:
        """Reads and extends the memory with T new tokens: q, k [B, H, T, d], v [B, H, T, dv]
        (fp64) -> [B, H, T, dv]; with the per-head bandwidths ``sigmas`` also the log mass of each
        read (``log_mass``, [B, H, T], -inf where nothing is read): (out, log_mass)."""
        T = q.shape[2]
        out = np.zeros((self.batch, self.heads, T, self.value_dim))
        lz = np.full((self.batch, self.heads, T), -math.inf)
        t = 0
        while t < T:
            pos = self.seen + t
            if pos % self.chunk == 0 and pos > 0:
                self.flush()
            end = min(T, t + self.chunk - pos % self.chunk)  # the rest of this chunk
            if pos >= self.chunk:
                for b in range(self.batch):
                    for h in range(self.heads):
                        out[b, h, t:end] = self.memories[b][h].readout(q[b, h, t:end])
                        if sigmas is not None:
                            lz[b, h, t:end] = log_mass(self.memories[b][h], q[b, h, t:end],
                                                       sigmas[h])
            for j in range(t, end):
                self.pending_ids.append(self.seen + j)
                self.pending_keys.append(k[:, :, j])
                self.pending_values.append(v[:, :, j])
            t = end
        self.seen += T
        return out if sigmas is None else (out, lz)


class HybridLayerState:
    """One HybridAttention layer's decoding state (docs/layers.md §3): ``memory`` (an
    SVLayerState fed the token t - (W - 1) at step t, i.e. the keys before the memory boundary
    b(t); None without ``memory``), the local path's keys (rotated when ``rope``), raw keys and
    values from position ``start`` = b(last token) on, and the chunk gate's chunk means of x."""

    def __init__(self, owner: nn.Module, batch: int, memory: Optional[SVLayerState],
                 sigmas: List[float]) -> None:
        self.owner, self.batch, self.memory, self.sigmas = id(owner), batch, memory, sigmas
        self.seen, self.start = 0, 0
        self.keys_local: Optional[torch.Tensor] = None  # [B, H, n, d] positions start..seen-1
        self.keys: Optional[torch.Tensor] = None
        self.values: Optional[torch.Tensor] = None
        self.chunk_rows: List[torch.Tensor] = []         # x rows of the chunk being read
        self.chunk_means: Dict[int, torch.Tensor] = {}   # chunk index -> mean of its x [B, D]

    def append(self, keys_local: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> None:
        cat = lambda a, b: b if a is None else torch.cat([a, b], 2)  # noqa: E731
        self.keys_local = cat(self.keys_local, keys_local)
        self.keys, self.values = cat(self.keys, keys), cat(self.values, values)

    def trim(self, start: int) -> None:
        """Drops the positions before ``start`` (older than every later token's b(t))."""
        if start > self.start and self.keys is not None:
            n = start - self.start
            self.keys_local, self.keys = self.keys_local[:, :, n:], self.keys[:, :, n:]
            self.values, self.start = self.values[:, :, n:], start


class SVCache:
    """Memory state of a model's SV layers across calls, indexed by ``layer_idx`` (like
    flash-linear-attention's ``Cache``). Pass it as ``past_key_values`` to each layer's forward,
    or bind it to a whole model with ``bind_cache(model, cache)``; a layer with ``layer_idx=None``
    gets the next free index on its first call."""

    def __init__(self) -> None:
        self.layers: Dict[int, Union[SVLayerState, HybridLayerState]] = {}
        self._auto: Dict[int, int] = {}  # id(module) -> index for modules without layer_idx

    def __len__(self) -> int:
        return len(self.layers)

    def __contains__(self, layer_idx: int) -> bool:
        return layer_idx in self.layers

    def __getitem__(self, layer_idx: int) -> SVLayerState:
        if layer_idx not in self.layers:
            raise KeyError(f"layer_idx: no state for layer {layer_idx}")
        return self.layers[layer_idx]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Tokens read so far by layer ``layer_idx`` (0 before its first call)."""
        return self.layers[layer_idx].seen if layer_idx in self.layers else 0

    def index_of(self, module: nn.Module, layer_idx: Optional[int]) -> int:
        if layer_idx is not None:
            return layer_idx
        if id(module) not in self._auto:
            taken = set(self.layers) | set(self._auto.values())
            self._auto[id(module)] = next(i for i in range(len(taken) + 1) if i not in taken)
        return self._auto[id(module)]

    def layer(self, index: int, batch: int, heads: int, dim: int, value_dim: int, chunk: int,
              bounded: bool, settings: Callable[[], List[MemorySettings]]) -> SVLayerState:
        """The state of layer ``index``, created on first use (with the per-head settings that
        ``settings()`` returns); later calls must match its shape."""
        st = self.layers.get(index)
        if isinstance(st, HybridLayerState):
            raise ValueError(f"past_key_values: layer {index} holds the state of a "
                             f"HybridAttention layer, not of an SVAttention layer (give each "
                             f"layer its own layer_idx)")
        if st is None:
            st = self.layers[index] = SVLayerState(batch, heads, dim, value_dim, chunk, bounded,
                                                   settings())
        elif (st.batch, st.heads, st.dim, st.value_dim, st.chunk) != (batch, heads, dim, value_dim,
                                                                      chunk):
            raise ValueError(f"past_key_values: layer {index} holds B={st.batch}, H={st.heads}, "
                             f"d={st.dim}, dv={st.value_dim}, chunk={st.chunk}; got B={batch}, "
                             f"H={heads}, d={dim}, dv={value_dim}, chunk={chunk}")
        return st


    def hybrid_layer(self, index: int, owner: nn.Module, batch: int,
                     make: Callable[[], HybridLayerState]) -> HybridLayerState:
        """The state of HybridAttention layer ``index``, created on first use by ``make()``; later
        calls must come from the same module with the same batch size."""
        st = self.layers.get(index)
        if st is None:
            st = self.layers[index] = make()
        elif not isinstance(st, HybridLayerState):
            raise ValueError(f"past_key_values: layer {index} holds the state of an SVAttention "
                             f"layer, not of a HybridAttention layer (give each layer its own "
                             f"layer_idx)")
        elif st.owner != id(owner):
            raise ValueError(f"past_key_values: layer {index} holds the state of another "
                             f"HybridAttention module (a cache serves one model; use a new "
                             f"SVCache per model)")
        elif st.batch != batch:
            raise ValueError(f"past_key_values: layer {index} holds B={st.batch}; got B={batch}")
        return st


def head_memory_settings(exact_settings, log_sigma: Optional[torch.Tensor], heads: int
                         ) -> List[MemorySettings]:
    """Per-head core settings of the exact op: bandwidth exp(log_sigma[h]) or problem.bandwidth."""
    if log_sigma is None:
        sig = [float(exact_settings.problem.bandwidth)] * heads
    else:
        sig = [math.exp(x) for x in log_sigma.detach().to("cpu", torch.float64).tolist()]
    return [exact_settings.memory_settings(s) for s in sig]


_BOUND: Dict[int, SVCache] = {}


def bound_cache(module: nn.Module) -> Optional[SVCache]:
    return _BOUND.get(id(module)) if _BOUND else None


@contextlib.contextmanager
def bind_cache(model: nn.Module, cache: SVCache) -> Iterator[SVCache]:
    """Within the block, every SV layer of ``model`` reads and extends ``cache`` in its forward,
    so a model whose forward does not pass ``past_key_values`` down decodes incrementally."""
    from .modules import HybridAttention, SVAttention
    if not isinstance(cache, SVCache):
        raise TypeError(f"cache: expected svattn.torch.SVCache, got {type(cache).__name__}")
    layers = [m for m in model.modules() if isinstance(m, (SVAttention, HybridAttention))]
    if not layers:
        raise TypeError(f"model: {type(model).__name__} holds no svattn.torch.SVAttention or "
                        f"HybridAttention layer")
    for m in layers:
        _BOUND[id(m)] = cache
    try:
        yield cache
    finally:
        for m in layers:
            _BOUND.pop(id(m), None)


def log_mass(memory: Memory, queries: np.ndarray, sigma: float) -> np.ndarray:
    """log sum_j a_j k(q, x_j) over the support (a_j > 0) of ``memory`` for queries [m, d], with
    k(q, x) = exp(-|q - x|^2 / sigma^2); -inf for an empty support (the exact op's log mass, the
    hybrid's joint gate, docs/layers.md §3)."""
    st = memory.state()
    ids, alpha = np.asarray(st.ids, dtype=np.int64), np.asarray(st.alpha, dtype=np.float64)
    keep = alpha > 0
    if not keep.any():
        return np.full(queries.shape[0], -math.inf)
    tok_ids, keys, _ = memory.tokens()
    pos = {int(i): r for r, i in enumerate(np.asarray(tok_ids).tolist())}
    x = np.asarray(keys)[[pos[int(i)] for i in ids[keep]]]
    dist = ((queries[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    logit = np.log(alpha[keep])[None, :] - dist / (sigma * sigma)
    mx = logit.max(1)
    return mx + np.log(np.exp(logit - mx[:, None]).sum(1))
