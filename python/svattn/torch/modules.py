"""Attention modules with one interface, ``hidden_states [B, T, hidden_size] -> [B, T,
hidden_size]``, each strictly causal, with the parameter names of the C++ layers
(include/svattn/torch/attention.h) and the constructor conventions of flash-linear-attention
(``hidden_size``, ``num_heads``, ``layer_idx``), so a user swaps the attention of a PyTorch model in
one line (docs/python.md "Modules"). A forward makes no host sync unless diagnostics are asked for
(``return_diagnostics=True`` or ``record_diagnostics()``)."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import time
import warnings
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import functional as Fsv
from .cache import HybridLayerState, SVCache, SVLayerState, bound_cache, head_memory_settings
from .settings import BatchedSettings, ExactSettings, HybridSettings

_RECORDING = [0]


@contextlib.contextmanager
def record_diagnostics() -> Iterator[None]:
    """Within the block, every SV module's forward fills ``module.diagnostics`` (support sizes,
    gate mean, solver seconds; this copies a few numbers to the host, i.e. syncs a GPU)."""
    _RECORDING[0] += 1
    try:
        yield
    finally:
        _RECORDING[0] -= 1


def _sizes(owner: str, hidden_size: Optional[int], num_heads: Optional[int], d_model: Optional[int],
           n_heads: Optional[int]) -> tuple:
    """(hidden_size, num_heads) from the new names or their deprecated aliases d_model, n_heads."""
    for new, old, nv, ov in (("hidden_size", "d_model", hidden_size, d_model),
                             ("num_heads", "n_heads", num_heads, n_heads)):
        if ov is not None:
            if nv is not None:
                raise TypeError(f"{owner}: pass {new} or its deprecated alias {old}, not both")
            warnings.warn(f"{owner}: {old} is deprecated, use {new}", DeprecationWarning,
                          stacklevel=3)
    hs = d_model if d_model is not None else (1024 if hidden_size is None else hidden_size)
    nh = n_heads if n_heads is not None else (4 if num_heads is None else num_heads)
    return hs, nh


class _Attention(nn.Module):
    """Shared q/k/v/o projections (no bias) and head split/merge."""

    def __init__(self, hidden_size: int, num_heads: int, rope: bool = False,
                 layer_idx: Optional[int] = None) -> None:
        super().__init__()
        if isinstance(hidden_size, bool) or not isinstance(hidden_size, int) or hidden_size < 1:
            raise ValueError(f"hidden_size must be an int >= 1, got {hidden_size!r}")
        if (isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1
                or hidden_size % num_heads):
            raise ValueError(f"num_heads must divide hidden_size, got {num_heads!r}")
        if rope and (hidden_size // num_heads) % 2:
            raise ValueError(f"num_heads must give an even head dimension with rope, got {num_heads}")
        if layer_idx is not None and (isinstance(layer_idx, bool) or not isinstance(layer_idx, int)
                                      or layer_idx < 0):
            raise ValueError(f"layer_idx must be None or an int >= 0, got {layer_idx!r}")
        self.hidden_size, self.num_heads, self.layer_idx = hidden_size, num_heads, layer_idx
        self.head_dim = hidden_size // num_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.diagnostics: Dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        # Deprecated aliases d_model, n_heads (resolved here, not as properties, so that
        # TorchScript's attribute scan does not trigger their warning).
        if name in ("d_model", "n_heads"):
            new = "hidden_size" if name == "d_model" else "num_heads"
            warnings.warn(f"{name} is deprecated, use {new}", DeprecationWarning, stacklevel=2)
            return getattr(self, new)
        return super().__getattr__(name)

    def _heads(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"hidden_states must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 3 or x.size(2) != self.hidden_size:
            raise ValueError("hidden_states must be [B, T, " + str(self.hidden_size) + "], got "
                             + str(list(x.shape)))
        B, T = x.size(0), x.size(1)
        dh = self.hidden_size // self.num_heads  # explicit: view cannot infer it when T = 0
        q = self.q_proj(x).view(B, T, self.num_heads, dh).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.num_heads, dh).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_heads, dh).transpose(1, 2)
        return q, k, v

    def _merge(self, o: torch.Tensor) -> torch.Tensor:
        B, _, T, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(B, T, self.hidden_size))

    def _empty(self, v: torch.Tensor) -> torch.Tensor:
        """T = 0: the empty output [B, 0, hidden_size] (no token, nothing to attend to)."""
        return self._merge(v)


_COMMON_ARGS = """
        hidden_size (int): width of the input and output. Default: 1024.
        num_heads (int): number of heads; must divide ``hidden_size``. Default: 4.
        layer_idx (int, optional): index of the layer in its model. Default: None.
        d_model, n_heads: deprecated aliases of ``hidden_size`` and ``num_heads`` (kept for one
            release; a DeprecationWarning names the new argument)."""


def _doc(summary: str, extra: str = "") -> str:
    return summary + "\n\n    Args:" + _COMMON_ARGS + extra + "\n    "


class SoftmaxAttention(_Attention):
    __doc__ = _doc("Full causal softmax attention with rotary positions.", """
        rope (bool): rotary position embedding on q and k. Default: True.
        rope_base (float): rotary base. Default: 10000.""")

    def __init__(self, hidden_size: Optional[int] = None, num_heads: Optional[int] = None,
                 rope: bool = True, rope_base: float = 10000.0, layer_idx: Optional[int] = None, *,
                 d_model: Optional[int] = None, n_heads: Optional[int] = None) -> None:
        hs, nh = _sizes(type(self).__name__, hidden_size, num_heads, d_model, n_heads)
        super().__init__(hs, nh, rope, layer_idx)
        self.rope, self.rope_base = rope, rope_base

    def _rope(self, q: torch.Tensor, k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.rope:
            return Fsv.apply_rope(q, self.rope_base), Fsv.apply_rope(k, self.rope_base)
        return q, k

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(hidden_states)
        if hidden_states.size(1) == 0:
            return self._empty(v)
        q, k = self._rope(q, k)
        return self._merge(Fsv.causal_softmax_attention(q, k, v))


class SlidingWindowAttention(SoftmaxAttention):
    __doc__ = _doc("Causal softmax over the last ``window`` tokens.", """
        window (int): tokens each query reads, its own included. Default: 128.
        rope (bool), rope_base (float): as in SoftmaxAttention.""")

    def __init__(self, hidden_size: Optional[int] = None, num_heads: Optional[int] = None,
                 window: int = 128, rope: bool = True, rope_base: float = 10000.0,
                 layer_idx: Optional[int] = None, *, d_model: Optional[int] = None,
                 n_heads: Optional[int] = None) -> None:
        hs, nh = _sizes(type(self).__name__, hidden_size, num_heads, d_model, n_heads)
        super().__init__(hs, nh, rope, rope_base, layer_idx)
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(hidden_states)
        if hidden_states.size(1) == 0:
            return self._empty(v)
        q, k = self._rope(q, k)
        return self._merge(Fsv.sliding_window_attention(q, k, v, self.window))


class LinearAttention(_Attention):
    __doc__ = _doc("Causal linear attention, phi = elu + 1.", """
        scan_chunk (int): chunk length of the chunkwise scan. Default: 64.""")

    def __init__(self, hidden_size: Optional[int] = None, num_heads: Optional[int] = None,
                 scan_chunk: int = 64, layer_idx: Optional[int] = None, *,
                 d_model: Optional[int] = None, n_heads: Optional[int] = None) -> None:
        hs, nh = _sizes(type(self).__name__, hidden_size, num_heads, d_model, n_heads)
        super().__init__(hs, nh, layer_idx=layer_idx)
        self.scan_chunk = scan_chunk

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(hidden_states)
        if hidden_states.size(1) == 0:
            return self._empty(v)
        return self._merge(Fsv.linear_attention(q, k, v, self.scan_chunk))


class DeltaNet(_Attention):
    __doc__ = _doc("DeltaNet: L2-normalised q and k, beta_t = sigmoid(beta_proj(x_t)) per head.", """
        scan_chunk (int): chunk length of the chunkwise WY scan. Default: 64.""")

    def __init__(self, hidden_size: Optional[int] = None, num_heads: Optional[int] = None,
                 scan_chunk: int = 64, layer_idx: Optional[int] = None, *,
                 d_model: Optional[int] = None, n_heads: Optional[int] = None) -> None:
        hs, nh = _sizes(type(self).__name__, hidden_size, num_heads, d_model, n_heads)
        super().__init__(hs, nh, layer_idx=layer_idx)
        self.scan_chunk = scan_chunk
        self.beta_proj = nn.Linear(hs, nh)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(hidden_states)
        if hidden_states.size(1) == 0:
            return self._empty(v)
        q, k = F.normalize(q, dim=-1, eps=1e-6), F.normalize(k, dim=-1, eps=1e-6)
        beta = torch.sigmoid(self.beta_proj(hidden_states)).transpose(1, 2)
        return self._merge(Fsv.delta_rule(q, k, v, beta, self.scan_chunk))


def _support_diagnostics(info: Dict[str, Any], seconds: float) -> Dict[str, Any]:
    """The diagnostics dict of an SV forward (copies to the host: only when asked for)."""
    support = info["support"]
    s = support.to(torch.float64)
    if s.dim() == 3:  # [B, H, nC]: chunk 0 has no memory
        s = s[:, :, 1:]
        per_head = s.mean(dim=(0, 2)) if s.numel() else torch.zeros(support.size(1), dtype=torch.float64)
    else:
        per_head = s.mean(dim=0)
    d = {"support_per_head": per_head.cpu().tolist(), "support_mean": float(per_head.mean()),
         "solver_seconds": seconds}
    d.update({k: v for k, v in info.items() if k != "support"})
    return d


def _want_diagnostics(return_diagnostics: bool) -> bool:
    if not isinstance(return_diagnostics, bool):
        raise TypeError(f"return_diagnostics must be a bool, got {type(return_diagnostics).__name__}")
    return return_diagnostics or _RECORDING[0] > 0


class SVAttention(_Attention):
    __doc__ = _doc("""Pure SV attention, strictly causal: the queries of chunk c read the SV memory of
    the keys of chunks 0..c-1 (chunk 0 reads 0); ``chunk=1``: token t reads every token < t.""", """
        settings (ExactSettings | BatchedSettings): the memory's problem; the path follows the
            type (exact: fp64 on the CPU; batched: tensor ops on the inputs' device). Packed once
            for the op when set. Default: ExactSettings().
        chunk (int): causal chunk length of the memory. Default: 1.
        learn_bandwidth (bool): a learnable per-head log_sigma (else a buffer). Default: True.
        normalize_keys (bool): L2-normalise q and k before the memory. Default: True.

    Forward: ``forward(hidden_states, past_key_values=None, return_diagnostics=False)``; with an
    ``SVCache`` (exact path only) the layer reads and extends its memory state instead of
    solving the prefix again; with ``return_diagnostics`` it returns ``(output, dict)``.""")

    def __init__(self, hidden_size: Optional[int] = None, num_heads: Optional[int] = None,
                 settings: Any = None, chunk: int = 1, learn_bandwidth: bool = True,
                 normalize_keys: bool = True, layer_idx: Optional[int] = None, *,
                 d_model: Optional[int] = None, n_heads: Optional[int] = None) -> None:
        hs, nh = _sizes(type(self).__name__, hidden_size, num_heads, d_model, n_heads)
        super().__init__(hs, nh, layer_idx=layer_idx)
        self.settings = ExactSettings() if settings is None else settings
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise ValueError(f"chunk must be an int >= 1, got {chunk!r}")
        self.chunk, self.normalize_keys = chunk, normalize_keys
        ls = torch.full((nh,), math.log(self.settings.problem.bandwidth))
        if learn_bandwidth:
            self.log_sigma = nn.Parameter(ls)
        else:
            self.register_buffer("log_sigma", ls)
        self.learn_bandwidth = learn_bandwidth

    @property
    def settings(self) -> Any:
        return self._settings

    @settings.setter
    def settings(self, s: Any) -> None:
        if not isinstance(s, (ExactSettings, BatchedSettings)):
            raise TypeError(f"settings must be ExactSettings or BatchedSettings, got {type(s).__name__}")
        s.validate()
        self._settings, self._packed, self._exact = s, s.pack(), isinstance(s, ExactSettings)

    @property
    def path(self) -> str:
        return "exact" if self._exact else "batched"

    def _qk(self, hidden_states: torch.Tensor):
        q, k, v = self._heads(hidden_states)
        if self.normalize_keys:
            q, k = F.normalize(q, dim=-1, eps=1e-6), F.normalize(k, dim=-1, eps=1e-6)
        return q, k, v

    def forward(self, hidden_states: torch.Tensor, past_key_values: Optional[SVCache] = None,
                return_diagnostics: bool = False) -> Any:
        want = _want_diagnostics(return_diagnostics)
        cache = past_key_values if past_key_values is not None else bound_cache(self)
        q, k, v = self._qk(hidden_states)
        if hidden_states.size(1) == 0:
            out = self._empty(v)
            return (out, {}) if return_diagnostics else out
        t0 = time.perf_counter() if want else 0.0
        if cache is not None:
            o, diag = self._read_cache(cache, q, k, v), {}
            if want:
                diag = {"tokens_seen": cache[cache.index_of(self, self.layer_idx)].seen,
                        "solver_seconds": time.perf_counter() - t0}
        else:
            o, info = Fsv.sv_attention_packed(q, k, v, self._packed, self._exact,
                                              self.log_sigma if self.learn_bandwidth else None,
                                              self.chunk)
            diag = _support_diagnostics(info, time.perf_counter() - t0) if want else {}
        out = self._merge(o)
        if want:
            self.diagnostics = diag
        return (out, diag) if return_diagnostics else out

    def _read_cache(self, cache: SVCache, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
                    ) -> torch.Tensor:
        if not isinstance(cache, SVCache):
            raise TypeError(f"past_key_values must be an svattn.torch.SVCache, got {type(cache).__name__}")
        if not self._exact:
            raise ValueError("past_key_values: incremental decoding needs the exact path "
                             "(settings=ExactSettings); this layer uses the batched path")
        B, H, _, d = k.shape
        ls = self.log_sigma if self.learn_bandwidth else None
        st = cache.layer(cache.index_of(self, self.layer_idx), B, H, d, v.size(-1), self.chunk,
                         self._settings.bounded,
                         lambda: head_memory_settings(self._settings, ls, H))
        as_np = lambda t: t.detach().to("cpu", torch.float64).contiguous().numpy()  # noqa: E731
        o = st.step(as_np(q), as_np(k), as_np(v))
        return torch.from_numpy(np.ascontiguousarray(o)).to(dtype=v.dtype, device=v.device)


class HybridAttention(_Attention):
    __doc__ = _doc("""Hybrid SV attention (docs/layers.md §3): a local causal softmax (``local``:
    inside chunks of ``settings.chunk`` tokens, or a sliding window of at least ``local_window``
    tokens) plus the SV memory of the tokens older than the local path (chunk boundary b(t)),
    mixed by a gate per head ('chunk', 'token', 'position' or 'joint'). Tokens with no memory
    (b(t) = 0) use the local path alone; ``memory=False`` is the local path alone everywhere.""", """
        settings (HybridSettings, optional): problem, chunk, path, gate, local, ... Default:
            HybridSettings().
        **overrides: fields of HybridSettings replaced on a copy of ``settings`` (``chunk=32``).

    Parameters: q/k/v/o_proj, log_sigma [H] (a buffer without learn_bandwidth), gate_bias [H],
    gate_proj (hidden_size -> H, no bias, zero-initialised), gate_position [H, chunk] (position
    gate only): the names of the C++ layer. Forward: ``forward(hidden_states,
    past_key_values=None, return_diagnostics=False)``; with an ``SVCache`` (exact path, or
    ``memory=False``) the layer reads and extends its memory, local keys and gate state instead
    of solving the prefix again (docs/python.md "Incremental decoding"); diagnostics (support_per_head, support_mean, gate_mean,
    solver_seconds, and fista_residual, negative_coefficients on the batched path) only when
    asked for.""")

    def __init__(self, hidden_size: Optional[int] = None, num_heads: Optional[int] = None,
                 settings: Optional[HybridSettings] = None, layer_idx: Optional[int] = None, *,
                 d_model: Optional[int] = None, n_heads: Optional[int] = None,
                 **overrides: Any) -> None:
        hs, nh = _sizes(type(self).__name__, hidden_size, num_heads, d_model, n_heads)
        if settings is not None and not isinstance(settings, HybridSettings):
            raise TypeError(f"settings must be HybridSettings, got {type(settings).__name__}")
        try:
            s = dataclasses.replace(settings or HybridSettings(), **overrides)
        except TypeError as e:
            raise TypeError(f"overrides: {e}") from None
        s.validate()
        super().__init__(hs, nh, s.rope, layer_idx)
        self.settings = s
        self._path_settings = (ExactSettings(problem=s.problem, bounded=s.bounded) if s.path == "exact"
                               else s.batched_settings())
        self._packed = self._path_settings.pack()
        ls = torch.full((nh,), math.log(s.problem.bandwidth))
        if s.learn_bandwidth:
            self.log_sigma = nn.Parameter(ls)
        else:
            self.register_buffer("log_sigma", ls)
        self.gate_bias = nn.Parameter(torch.full((nh,), float(s.gate_bias_init)))
        self.gate_proj = nn.Linear(hs, nh, bias=False)
        if s.gate == "position":
            self.gate_position = nn.Parameter(torch.zeros(nh, s.chunk))
        with torch.no_grad():
            self.gate_proj.weight.zero_()  # the gate starts from its bias alone
        self.last_gate: Optional[torch.Tensor] = None

    def gate_parameters(self) -> Iterator[nn.Parameter]:
        """The gate's parameters (gate_bias, gate_proj.weight, gate_position): ``param_groups``
        gives them no weight decay unless asked (docs/python.md "Training")."""
        yield self.gate_bias
        yield self.gate_proj.weight
        if self.settings.gate == "position":
            yield self.gate_position

    def _gate(self, x: torch.Tensor, mass: Optional[torch.Tensor]) -> torch.Tensor:
        """Gate per head and token [B, H, T] before the b(t) > 0 mask (docs/layers.md §3)."""
        s, L = self.settings, self.settings.chunk
        B, T, H = x.size(0), x.size(1), self.num_heads
        # u = t - (W - 1) clamped at 0: m(t) = floor(u / L) the memory read, p(t) = u mod L.
        u = torch.clamp_min(torch.arange(T, device=x.device) - (s.min_local() - 1), 0)
        if s.gate_override is not None:
            return torch.full((B, H, T), float(s.gate_override), dtype=x.dtype, device=x.device)
        if s.gate == "token":
            return torch.sigmoid(self.gate_proj(x) + self.gate_bias).transpose(1, 2)
        if s.gate == "joint":
            return torch.sigmoid(mass + self.gate_bias.view(1, H, 1))
        if s.gate == "position":
            pos = self.gate_position.index_select(1, torch.remainder(u, L))  # [H, T]
            return torch.sigmoid(self.gate_proj(x).transpose(1, 2) + self.gate_bias.view(1, H, 1)
                                 + pos.unsqueeze(0))
        # Summary of chunk m-1 (mean of x), the last chunk the memory took in: causal.
        nc = (T + L - 1) // L
        xp = F.pad(x, (0, 0, 0, nc * L - T))
        counts = torch.full((nc,), float(L), dtype=x.dtype, device=x.device)
        counts[nc - 1] = float(T - (nc - 1) * L)
        summary = xp.view(B, nc, L, self.hidden_size).sum(2) / counts.view(1, nc, 1)
        prev = torch.cat([torch.zeros_like(summary[:, :1]), summary[:, :nc - 1]], 1)
        gc = torch.sigmoid(self.gate_proj(prev) + self.gate_bias).transpose(1, 2)
        return gc.index_select(2, torch.div(u, L, rounding_mode="floor"))

    def _global(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, joint: bool,
                want: bool) -> Tuple[torch.Tensor, Optional[torch.Tensor], Dict[str, Any]]:
        """Query t reads the memory of the tokens s < b(t): the chunked op's query position
        u = t - (W - 1) (W = 1 in chunk mode), on the first T - (W - 1) keys (the C++ layer's
        global path). Returns (o_glob, log_mass or None, diagnostics)."""
        s = self.settings
        shift = s.min_local() - 1
        Tm = q.size(2) - shift
        qs, ks, vm = q[:, :, shift:], k[:, :, :Tm], v[:, :, :Tm]
        if s.normalize_keys:
            qs, ks = F.normalize(qs, dim=-1, eps=1e-6), F.normalize(ks, dim=-1, eps=1e-6)
        t0 = time.perf_counter() if want else 0.0
        o, info = Fsv.sv_attention_packed(qs, ks, vm, self._packed, s.path == "exact",
                                          self.log_sigma if s.learn_bandwidth else None, s.chunk,
                                          log_mass=joint)
        lz = info.pop("log_mass", None)
        diag = _support_diagnostics(info, time.perf_counter() - t0) if want else {}
        if shift:
            o = F.pad(o, (0, 0, shift, 0))
            if lz is not None:
                lz = F.pad(lz, (shift, 0), value=-math.inf)
        return o, lz, diag

    def forward(self, hidden_states: torch.Tensor, past_key_values: Optional[SVCache] = None,
                return_diagnostics: bool = False) -> Any:
        want = _want_diagnostics(return_diagnostics)
        s, x = self.settings, hidden_states
        q, k, v = self._heads(x)
        B, T, H = x.size(0), x.size(1), self.num_heads
        cache = past_key_values if past_key_values is not None else bound_cache(self)
        if cache is not None:
            t0 = time.perf_counter() if want else 0.0
            st = self._state(cache, B, q.size(-1), v.size(-1))
            out = self._empty(v) if T == 0 else self._merge(self._decode(st, x, q, k, v))
            diag = ({"tokens_seen": st.seen, "solver_seconds": time.perf_counter() - t0}
                    if want else {})
            if want:
                self.diagnostics = diag
            return (out, diag) if return_diagnostics else out
        no_memory = {"support_per_head": [0.0] * H, "support_mean": float("nan"),
                     "gate_mean": float("nan"), "solver_seconds": 0.0}
        first_mem = s.chunk + s.min_local() - 1  # the first t with b(t) > 0
        if T == 0 or not s.memory or first_mem >= T:
            self.last_gate = torch.zeros(B, H, T, dtype=x.dtype, device=x.device)
            out = self._empty(v) if T == 0 else self._merge(self._local(q, k, v, False)[0])
            diag = (no_memory if s.memory else {}) if want else {}
        else:
            joint = s.gate == "joint" and s.gate_override is None
            o_loc, lz_loc = self._local(q, k, v, joint)
            o_glob, lz_mem, diag = self._global(q, k, v, joint, want)
            mem_at = (torch.arange(T, device=x.device) >= first_mem).view(1, 1, T)
            mass = (lz_mem - lz_loc).masked_fill(~mem_at, 0.0) if joint else None
            g = self._gate(x, mass) * mem_at.to(x.dtype)
            self.last_gate = g.detach()
            if want:
                diag["gate_mean"] = float(g.detach()[:, :, first_mem:].mean())
            gu = g.unsqueeze(-1)
            out = self._merge(gu * o_glob + (1 - gu) * o_loc)
        if want:
            self.diagnostics = diag
        return (out, diag) if return_diagnostics else out

    def _state(self, cache: SVCache, B: int, d: int, dv: int) -> HybridLayerState:
        if not isinstance(cache, SVCache):
            raise TypeError(f"past_key_values must be an svattn.torch.SVCache, got {type(cache).__name__}")
        s = self.settings
        if s.memory and s.path != "exact":
            raise ValueError("past_key_values: incremental decoding needs the exact path "
                             "(settings.path='exact'); this layer uses the batched path")
        ls = self.log_sigma if s.learn_bandwidth else None

        def make() -> HybridLayerState:
            if not s.memory:
                return HybridLayerState(self, B, None, [])
            per_head = head_memory_settings(self._path_settings, ls, self.num_heads)
            sig = ([math.exp(a) for a in ls.detach().to("cpu", torch.float64).tolist()]
                   if ls is not None else [float(s.problem.bandwidth)] * self.num_heads)
            mem = SVLayerState(B, self.num_heads, d, dv, s.chunk, s.bounded, per_head)
            return HybridLayerState(self, B, mem, sig)

        return cache.hybrid_layer(cache.index_of(self, self.layer_idx), self, B, make)

    def _decode(self, st: HybridLayerState, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
                v: torch.Tensor) -> torch.Tensor:
        """The forward's heads output [B, H, T, dv] for tokens st.seen.. (docs/python.md
        "Incremental decoding"): the local path over the cached keys from b(t), the memory fed
        the token t - (W - 1) at step t, and the gate; equal to the full forward's rows."""
        s, L, W = self.settings, self.settings.chunk, self.settings.min_local()
        T, t0 = x.size(1), st.seen
        kl, ql = k, q
        if s.rope:
            ql, kl = _rope_at(q, t0, s.rope_base), _rope_at(k, t0, s.rope_base)
        st.append(kl, k, v)
        joint = s.gate == "joint" and s.gate_override is None
        o_loc, lz_loc = self._decode_local(st, ql, t0)
        o_glob = torch.zeros_like(o_loc)
        lz_mem = torch.full_like(lz_loc, -math.inf)
        if st.memory is not None:
            self._decode_memory(st, q, t0, joint, o_glob, lz_mem)
        pos = torch.arange(t0, t0 + T, device=x.device)
        mem_at = (pos >= L + W - 1).view(1, 1, T)
        if not s.memory:
            g = torch.zeros(x.size(0), self.num_heads, T, dtype=x.dtype, device=x.device)
        else:
            mass = (lz_mem - lz_loc).masked_fill(~mem_at, 0.0) if joint else None
            g = self._decode_gate(st, x, pos, mass) * mem_at.to(x.dtype)
        self.last_gate = g.detach()
        st.seen = t0 + T
        st.trim(L * (max(t0 + T - W, 0) // L))
        gu = g.unsqueeze(-1)
        return gu * o_glob + (1 - gu) * o_loc

    def _decode_local(self, st: HybridLayerState, ql: torch.Tensor, t0: int
                      ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Local path of the new queries over the cached keys b(t) <= s <= t, and its log
        normaliser (the op's masked softmax, scores q.k / sqrt(dh))."""
        L, W = self.settings.chunk, self.settings.min_local()
        scale = 1.0 / math.sqrt(ql.size(-1))
        outs, lzs = [], []
        for j in range(ql.size(2)):
            t = t0 + j
            lo, hi = L * (max(t - W + 1, 0) // L) - st.start, t + 1 - st.start
            keys = st.keys_local[:, :, lo:hi].transpose(-1, -2)
            sc = torch.matmul(ql[:, :, j:j + 1], keys) * scale
            lzs.append(torch.logsumexp(sc, -1))
            outs.append(torch.matmul(torch.softmax(sc, -1), st.values[:, :, lo:hi]))
        return torch.cat(outs, 2), torch.cat(lzs, 2)

    def _decode_memory(self, st: HybridLayerState, q: torch.Tensor, t0: int, joint: bool,
                       o_glob: torch.Tensor, lz_mem: torch.Tensor) -> None:
        """Feeds the memory (query t, key and value t - (W - 1)) and writes its reads of the new
        tokens into o_glob [B, H, T, dv] and, for the joint gate, lz_mem [B, H, T]."""
        s, shift, T = self.settings, self.settings.min_local() - 1, q.size(2)
        j0 = max(shift - t0, 0)  # the first new token that reads the memory stream
        if j0 >= T:
            return
        lo = t0 + j0 - shift - st.start
        qs, ks = q[:, :, j0:], st.keys[:, :, lo:lo + T - j0]
        vs = st.values[:, :, lo:lo + T - j0]
        if s.normalize_keys:
            qs, ks = F.normalize(qs, dim=-1, eps=1e-6), F.normalize(ks, dim=-1, eps=1e-6)
        as_np = lambda t: t.detach().to("cpu", torch.float64).contiguous().numpy()  # noqa: E731
        o, lz = st.memory.step(as_np(qs), as_np(ks), as_np(vs), st.sigmas)
        o_glob[:, :, j0:] = torch.from_numpy(np.ascontiguousarray(o)).to(o_glob)
        if joint:
            lz_mem[:, :, j0:] = torch.from_numpy(lz).to(lz_mem)

    def _decode_gate(self, st: HybridLayerState, x: torch.Tensor, pos: torch.Tensor,
                     mass: Optional[torch.Tensor]) -> torch.Tensor:
        """The gate [B, H, T] of the new tokens at positions ``pos`` (``_gate`` on the cache)."""
        s, L, H = self.settings, self.settings.chunk, self.num_heads
        if s.gate != "chunk" or s.gate_override is not None:
            if s.gate == "position" and s.gate_override is None:
                u = torch.clamp_min(pos - (s.min_local() - 1), 0)
                g = self.gate_position.index_select(1, torch.remainder(u, L))
                return torch.sigmoid(self.gate_proj(x).transpose(1, 2)
                                     + self.gate_bias.view(1, H, 1) + g.unsqueeze(0))
            return self._gate(x, mass)
        gates = []
        for j, t in enumerate(pos.tolist()):
            m = max(t - (s.min_local() - 1), 0) // L  # reads chunk m - 1's mean
            prev = st.chunk_means.get(m - 1, torch.zeros_like(x[:, 0]))
            gates.append(torch.sigmoid(self.gate_proj(prev) + self.gate_bias))
            st.chunk_rows.append(x[:, j])
            if (t + 1) % L == 0:
                st.chunk_means[t // L] = torch.stack(st.chunk_rows, 1).sum(1) / float(L)
                st.chunk_rows = []
            for old in [c for c in st.chunk_means if c < m - 1]:
                del st.chunk_means[old]
        return torch.stack(gates, 2)

    def _local(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               log_normalizer: bool) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """The local path over b(t) <= s <= t (rotary positions when ``rope``)."""
        s = self.settings
        if s.rope:
            q, k = Fsv.apply_rope(q, s.rope_base), Fsv.apply_rope(k, s.rope_base)
        if log_normalizer:
            return Fsv.memory_local_attention(q, k, v, s.chunk, s.min_local(), True)
        return Fsv.memory_local_attention(q, k, v, s.chunk, s.min_local()), None


def _rope_at(x: torch.Tensor, start: int, base: float) -> torch.Tensor:
    """``apply_rope`` of x [B, H, T, dh] at positions start..start+T-1 (the op's formula)."""
    dh = x.size(-1)
    inv = torch.pow(base, -torch.arange(0, dh, 2, dtype=torch.float64, device=x.device) / dh)
    ang = torch.arange(start, start + x.size(2), dtype=torch.float64,
                       device=x.device).unsqueeze(-1) * inv.unsqueeze(0)
    cs, sn = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x1, x2 = x[..., :dh // 2], x[..., dh // 2:]
    return torch.cat([x1 * cs - x2 * sn, x1 * sn + x2 * cs], -1)


def param_groups(model: nn.Module, weight_decay: float = 0.01,
                 gate_weight_decay: float = 0.0) -> list:
    """Optimiser parameter groups of ``model``: the gate parameters of every HybridAttention in it
    (``gate_parameters()``) with ``gate_weight_decay`` (0: a decayed gate drifts to its bias-only
    0.5 split), every other trainable parameter with ``weight_decay``.
    ``torch.optim.AdamW(param_groups(model), lr=...)``."""
    for name, value in (("weight_decay", weight_decay), ("gate_weight_decay", gate_weight_decay)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be finite and >= 0, got {value}")
    gate_ids = {id(p) for m in model.modules() if isinstance(m, HybridAttention)
                for p in m.gate_parameters()}
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if id(p) not in gate_ids], "weight_decay": weight_decay},
            {"params": [p for p in params if id(p) in gate_ids], "weight_decay": gate_weight_decay}]
