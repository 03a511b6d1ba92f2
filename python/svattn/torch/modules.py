"""Attention modules with one interface, x [B, T, d_model] -> [B, T, d_model], each strictly
causal, with the parameter names of the C++ layers (include/svattn/torch/attention.h), so a user
swaps the attention of a PyTorch model in one line. ``module.diagnostics`` is a dict filled by
every forward."""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Dict, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .. import ProblemSettings
from . import functional as Fsv
from .settings import BatchedSettings, ExactSettings, HybridSettings


class _Attention(nn.Module):
    """Shared q/k/v/o projections (no bias) and head split/merge."""

    def __init__(self, d_model: int, n_heads: int, rope: bool = False) -> None:
        super().__init__()
        if d_model < 1:
            raise ValueError(f"d_model must be >= 1, got {d_model}")
        if n_heads < 1 or d_model % n_heads:
            raise ValueError(f"n_heads must divide d_model, got {n_heads}")
        if rope and (d_model // n_heads) % 2:
            raise ValueError(f"n_heads must give an even head dimension with rope, got {n_heads}")
        self.d_model, self.n_heads = d_model, n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.o_proj = nn.Linear(d_model, d_model, bias=False)
        self.diagnostics: Dict[str, Any] = {}

    def _heads(self, x: torch.Tensor):
        if x.dim() != 3 or x.size(2) != self.d_model:
            raise ValueError(f"x must be [B, T, {self.d_model}], got {list(x.shape)}")
        B, T, _ = x.shape
        dh = self.d_model // self.n_heads
        split = lambda y: y.view(B, T, self.n_heads, dh).transpose(1, 2)  # noqa: E731
        return split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))

    def _merge(self, o: torch.Tensor) -> torch.Tensor:
        B, _, T, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.d_model))

    def _empty(self, v: torch.Tensor) -> torch.Tensor:
        """T = 0: the empty output [B, 0, d_model] (no token, nothing to attend to)."""
        self.diagnostics = {"support_per_head": [0.0] * self.n_heads, "support_mean": float("nan"),
                            "solver_seconds": 0.0}
        return self._merge(v)


class SoftmaxAttention(_Attention):
    """Full causal softmax attention with rotary positions."""

    def __init__(self, d_model: int, n_heads: int, rope: bool = True, rope_base: float = 10000.0) -> None:
        super().__init__(d_model, n_heads, rope)
        self.rope, self.rope_base = rope, rope_base

    def _rope(self, q, k):
        if self.rope:
            return Fsv.apply_rope(q, self.rope_base), Fsv.apply_rope(k, self.rope_base)
        return q, k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(x)
        if x.size(1) == 0:
            return self._empty(v)
        q, k = self._rope(q, k)
        return self._merge(Fsv.causal_softmax_attention(q, k, v))


class SlidingWindowAttention(SoftmaxAttention):
    """Causal softmax over the last ``window`` tokens."""

    def __init__(self, d_model: int, n_heads: int, window: int = 128, rope: bool = True,
                 rope_base: float = 10000.0) -> None:
        super().__init__(d_model, n_heads, rope, rope_base)
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(x)
        if x.size(1) == 0:
            return self._empty(v)
        q, k = self._rope(q, k)
        return self._merge(Fsv.sliding_window_attention(q, k, v, self.window))


class LinearAttention(_Attention):
    """Causal linear attention, phi = elu + 1."""

    def __init__(self, d_model: int, n_heads: int, scan_chunk: int = 64) -> None:
        super().__init__(d_model, n_heads)
        self.scan_chunk = scan_chunk

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(x)
        if x.size(1) == 0:
            return self._empty(v)
        return self._merge(Fsv.linear_attention(q, k, v, self.scan_chunk))


class DeltaNet(_Attention):
    """DeltaNet: L2-normalised q and k, beta_t = sigmoid(beta_proj(x_t)) per head."""

    def __init__(self, d_model: int, n_heads: int, scan_chunk: int = 64) -> None:
        super().__init__(d_model, n_heads)
        self.scan_chunk = scan_chunk
        self.beta_proj = nn.Linear(d_model, n_heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(x)
        if x.size(1) == 0:
            return self._empty(v)
        q, k = F.normalize(q, dim=-1, eps=1e-6), F.normalize(k, dim=-1, eps=1e-6)
        beta = torch.sigmoid(self.beta_proj(x)).transpose(1, 2)
        return self._merge(Fsv.delta_rule(q, k, v, beta, self.scan_chunk))


def _support_diagnostics(support: torch.Tensor, skip_first: bool) -> Dict[str, Any]:
    s = support.to(torch.float64)
    if s.dim() == 3:  # [B, H, nC]: chunk 0 has no memory
        s = s[:, :, 1:] if skip_first else s
        per_head = s.mean(dim=(0, 2)) if s.numel() else torch.zeros(support.size(1), dtype=torch.float64)
    else:
        per_head = s.mean(dim=0)
    return {"support_per_head": per_head.cpu().tolist(), "support_mean": float(per_head.mean())}


class SVAttention(_Attention):
    """Pure SV attention, strictly causal: the queries of chunk c read the SV memory of the keys
    of chunks 0..c-1 (chunk 0 reads 0). ``chunk=1`` (default): token t reads every token < t.
    ``settings``: ExactSettings or BatchedSettings (path follows the type)."""

    def __init__(self, d_model: int, n_heads: int, settings: Any = None, chunk: int = 1,
                 learn_bandwidth: bool = True, normalize_keys: bool = True) -> None:
        super().__init__(d_model, n_heads)
        self.settings = settings if settings is not None else ExactSettings()
        self.path = "batched" if isinstance(self.settings, BatchedSettings) else "exact"
        self.settings.validate()
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        self.chunk, self.normalize_keys = chunk, normalize_keys
        ls = torch.full((n_heads,), math.log(self.settings.problem.bandwidth))
        if learn_bandwidth:
            self.log_sigma = nn.Parameter(ls)
        else:
            self.register_buffer("log_sigma", ls)
        self.learn_bandwidth = learn_bandwidth

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(x)
        if x.size(1) == 0:
            return self._empty(v)
        if self.normalize_keys:
            q, k = F.normalize(q, dim=-1, eps=1e-6), F.normalize(k, dim=-1, eps=1e-6)
        t0 = time.perf_counter()
        o, info = Fsv.sv_attention(q, k, v, self.settings, self.path,
                                   self.log_sigma if self.learn_bandwidth else None,
                                   chunk=self.chunk, return_info=True)
        d = _support_diagnostics(info["support"], True)
        d["solver_seconds"] = time.perf_counter() - t0
        d.update({k2: v2 for k2, v2 in info.items() if k2 != "support"})
        self.diagnostics = d
        return self._merge(o)


class HybridAttention(_Attention):
    """Hybrid SV attention (SPEC §9): causal softmax inside chunks of ``settings.chunk`` tokens,
    plus the SV memory of all earlier chunks, mixed by a gate per head and chunk ('chunk', from the
    previous chunk's mean input) or per token ('token'). Chunk 0 uses the local path alone.
    After each forward, ``diagnostics`` holds support_per_head, support_mean, gate_mean,
    solver_seconds (and fista_residual, negative_coefficients on the batched path)."""

    def __init__(self, d_model: int, n_heads: int, settings: Optional[HybridSettings] = None,
                 **overrides: Any) -> None:
        super().__init__(d_model, n_heads, True if settings is None else settings.rope)
        s = dataclasses.replace(settings or HybridSettings(), **overrides)
        s.validate()
        if s.rope and (d_model // n_heads) % 2:
            raise ValueError(f"n_heads must give an even head dimension with rope, got {n_heads}")
        self.settings = s
        ls = torch.full((n_heads,), math.log(s.problem.bandwidth))
        if s.learn_bandwidth:
            self.log_sigma = nn.Parameter(ls)
        else:
            self.register_buffer("log_sigma", ls)
        self.gate_bias = nn.Parameter(torch.full((n_heads,), float(s.gate_bias_init)))
        self.gate_proj = nn.Linear(d_model, n_heads, bias=False)
        with torch.no_grad():
            self.gate_proj.weight.zero_()  # the gate starts from its bias alone
        self.last_gate: Optional[torch.Tensor] = None

    def _gate(self, x: torch.Tensor, T: int, nc: int) -> torch.Tensor:
        s, L = self.settings, self.settings.chunk
        B = x.size(0)
        chunk_id = torch.div(torch.arange(T, device=x.device), L, rounding_mode="floor")
        has_mem = (chunk_id > 0).to(x.dtype).view(1, 1, T)
        if s.gate_override is not None:
            g = torch.full((B, self.n_heads, T), float(s.gate_override), dtype=x.dtype, device=x.device)
        elif s.gate == "token":
            g = torch.sigmoid(self.gate_proj(x) + self.gate_bias).transpose(1, 2)
        else:
            xp = F.pad(x, (0, 0, 0, nc * L - T))
            counts = torch.full((nc,), float(L), dtype=x.dtype, device=x.device)
            counts[nc - 1] = float(T - (nc - 1) * L)
            summary = xp.view(B, nc, L, self.d_model).sum(2) / counts.view(1, nc, 1)
            prev = torch.cat([torch.zeros_like(summary[:, :1]), summary[:, :nc - 1]], 1)
            gc = torch.sigmoid(self.gate_proj(prev) + self.gate_bias).transpose(1, 2)
            g = gc.index_select(2, chunk_id)
        return g * has_mem

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s, L = self.settings, self.settings.chunk
        q, k, v = self._heads(x)
        T = x.size(1)
        if T == 0:
            self.last_gate = torch.zeros(x.size(0), self.n_heads, 0, dtype=x.dtype, device=x.device)
            out = self._empty(v)
            self.diagnostics["gate_mean"] = float("nan")
            return out
        nc = (T + L - 1) // L
        ql, kl = q, k
        if s.rope:
            ql, kl = Fsv.apply_rope(q, s.rope_base), Fsv.apply_rope(k, s.rope_base)
        o_loc = Fsv.chunk_local_attention(ql, kl, v, L)
        if nc == 1:
            self.last_gate = torch.zeros(x.size(0), self.n_heads, T, dtype=x.dtype, device=x.device)
            self.diagnostics = {"support_per_head": [0.0] * self.n_heads, "support_mean": float("nan"),
                                "gate_mean": float("nan"), "solver_seconds": 0.0}
            return self._merge(o_loc)
        qs, ks = q, k
        if s.normalize_keys:
            qs, ks = F.normalize(q, dim=-1, eps=1e-6), F.normalize(k, dim=-1, eps=1e-6)
        t0 = time.perf_counter()
        path_settings = (ExactSettings(problem=s.problem, bounded=s.bounded) if s.path == "exact"
                         else s.batched_settings())
        o_glob, info = Fsv.sv_attention(qs, ks, v, path_settings, s.path,
                                        self.log_sigma if s.learn_bandwidth else None,
                                        chunk=L, return_info=True)
        d = _support_diagnostics(info["support"], True)
        d["solver_seconds"] = time.perf_counter() - t0
        d.update({k2: v2 for k2, v2 in info.items() if k2 != "support"})
        g = self._gate(x, T, nc)
        self.last_gate = g.detach()
        d["gate_mean"] = float(g.detach()[:, :, L:].mean())
        self.diagnostics = d
        gu = g.unsqueeze(-1)
        return self._merge(gu * o_glob + (1 - gu) * o_loc)
