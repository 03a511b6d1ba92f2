"""Settings of the torch paths (docs/python.md "Torch settings"). Each embeds the problem once as a
``svattn.ProblemSettings`` (kernel must be 'rbf'; ``problem.ridge`` is the problem's mu); the
batched solve's own ridge is ``solve_ridge``. Defaults are the C++ ones (include/svattn/torch)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .. import MemorySettings, ProblemSettings

_LIPSCHITZ = ("tangent", "power", "gershgorin")
_GATES = ("chunk", "token", "position", "joint")


def _bad(field_name: str, requirement: str, value: Any) -> None:
    # The core's message format: "<field> must be <requirement>, got <value>".
    raise ValueError(f"{field_name} must be {requirement}, got {value}")


def _check_problem(p: ProblemSettings, prefix: str) -> None:
    if p.kernel != "rbf":
        _bad(prefix + "problem.kernel.type", "rbf on the torch paths", p.kernel)
    try:
        p.validate()
    except ValueError as e:
        raise ValueError(prefix + "problem." + str(e)) from None


def as_problem(x: Union[ProblemSettings, MemorySettings, None], default: ProblemSettings) -> ProblemSettings:
    if x is None:
        return default
    if isinstance(x, MemorySettings):
        return x.problem
    if isinstance(x, ProblemSettings):
        return x
    raise TypeError(f"problem: expected ProblemSettings or MemorySettings, got {type(x).__name__}")


@dataclass
class ExactSettings:
    """Exact path (docs/layers.md §1): fp64 Cauwenberghs-Poggio memory per (batch, head)."""

    problem: ProblemSettings = field(default_factory=ProblemSettings)
    #: Chunked variant only: evict the reserve set at every chunk boundary.
    bounded: bool = False

    def validate(self, prefix: str = "") -> None:
        _check_problem(self.problem, prefix)

    def pack(self) -> tuple:
        """The op's settings arguments, packed once: (bandwidth, C, ridge, bounded)."""
        p = self.problem
        return (float(p.bandwidth), float(p.C), float(p.ridge), bool(self.bounded))

    def memory_settings(self, sigma: float) -> MemorySettings:
        """The core memory the exact op builds per (batch, head) with bandwidth ``sigma``."""
        p = self.problem
        return MemorySettings(mode="audit", kernel="rbf", bandwidth=sigma, C=p.C, ridge=p.ridge)


@dataclass
class BatchedSettings:
    """Batch-stabilised path (docs/layers.md §2): batched FISTA + ridge-regularised bordered solve."""

    problem: ProblemSettings = field(default_factory=ProblemSettings)
    iterations: int = 200
    #: Ridge lambda added to K_SS + mu I in the coefficient solve (C++ BatchedSettings::ridge).
    solve_ridge: float = 1e-3
    mask_tol: float = 1e-3
    lipschitz: str = "tangent"
    power_iterations: int = 20
    bisections: int = 0
    active_set_rounds: int = 3
    ipm_iterations: int = 12
    bounded: bool = False
    fp64: bool = False

    def validate(self, prefix: str = "") -> None:
        _check_problem(self.problem, prefix)
        if self.iterations < 1:
            _bad(prefix + "iterations", ">= 1", self.iterations)
        if not (math.isfinite(self.solve_ridge) and self.solve_ridge >= 0):
            _bad(prefix + "solve_ridge", "finite and >= 0", self.solve_ridge)
        if not (0 < self.mask_tol < 0.5):
            _bad(prefix + "mask_tol", "in (0, 0.5)", self.mask_tol)
        if self.lipschitz not in _LIPSCHITZ:
            _bad(prefix + "lipschitz", "one of " + ", ".join(_LIPSCHITZ), repr(self.lipschitz))
        if self.power_iterations < 1:
            _bad(prefix + "power_iterations", ">= 1", self.power_iterations)
        if not (0 <= self.bisections <= 100):
            _bad(prefix + "bisections", "in [0, 100]", self.bisections)
        if self.active_set_rounds < 0:
            _bad(prefix + "active_set_rounds", ">= 0", self.active_set_rounds)
        if self.ipm_iterations < 0:
            _bad(prefix + "ipm_iterations", ">= 0", self.ipm_iterations)

    def pack(self) -> tuple:
        """The op's settings arguments, packed once: (bandwidth, C, ridge, bounded, solver...)."""
        p = self.problem
        return (float(p.bandwidth), float(p.C), float(p.ridge), bool(self.bounded)) + self.solver_args()

    def solver_args(self) -> tuple:
        """The op's flat solver arguments after (bandwidth, C, mu)."""
        return (self.iterations, self.solve_ridge, self.mask_tol, self.lipschitz,
                self.power_iterations, self.bisections, self.active_set_rounds,
                self.ipm_iterations, self.fp64)


def _hybrid_problem() -> ProblemSettings:
    return ProblemSettings(C=1.0 / 16, bandwidth=1.0, ridge=1e-6)


@dataclass
class HybridSettings:
    """Hybrid SV attention (docs/layers.md §3): o_t = g o_global(q_t) + (1 - g) o_local(q_t).

    ``problem`` (C, bandwidth = the initial per-head sigma, ridge = mu) is used by both paths;
    ``batched`` holds the batched solver's own fields, and its ``problem``/``bounded`` must be left
    at their defaults or equal ``problem``/``bounded`` (never silently ignored).

    ``local``: 'chunk' (the paper's local softmax, reset at every chunk boundary) or 'window'
    (sliding: query t sees b(t) <= s <= t, at least the last ``local_window`` tokens, and the
    memory holds the tokens s < b(t), b(t) = chunk * floor(max(t - W + 1, 0) / chunk)).
    ``gate``: 'chunk' (from the previous chunk's mean input), 'token', 'position' (per token plus
    a learned [H, chunk] table of the position since the memory's last update) or 'joint' (one
    softmax over the memory's and the local path's logits). ``memory=False``: the layer is its
    local path alone (ablation).
    """

    problem: ProblemSettings = field(default_factory=_hybrid_problem)
    chunk: int = 64
    path: str = "batched"
    gate: str = "chunk"
    local: str = "chunk"
    local_window: int = 64
    memory: bool = True
    learn_bandwidth: bool = True
    normalize_keys: bool = True
    bounded: bool = False
    gate_bias_init: float = 0.0
    batched: BatchedSettings = field(default_factory=BatchedSettings)
    gate_override: Optional[float] = None
    rope: bool = True
    rope_base: float = 10000.0

    def validate(self) -> None:
        _check_problem(self.problem, "hybrid.")
        if self.chunk < 1:
            _bad("hybrid.chunk", ">= 1", self.chunk)
        if self.path not in ("exact", "batched"):
            _bad("hybrid.path", "'exact' or 'batched'", repr(self.path))
        if self.gate not in _GATES:
            _bad("hybrid.gate", "one of " + ", ".join(_GATES), repr(self.gate))
        if self.local not in ("chunk", "window"):
            _bad("hybrid.local", "'chunk' or 'window'", repr(self.local))
        if (isinstance(self.local_window, bool) or not isinstance(self.local_window, int)
                or self.local_window < 1):
            _bad("hybrid.local_window", "an int >= 1", self.local_window)
        if not isinstance(self.memory, bool):
            _bad("hybrid.memory", "a bool", repr(self.memory))
        if not math.isfinite(self.gate_bias_init):
            _bad("hybrid.gate_bias_init", "finite", self.gate_bias_init)
        if self.gate_override is not None and not (0 <= self.gate_override <= 1):
            _bad("hybrid.gate_override", "in [0, 1]", self.gate_override)
        if not self.rope_base > 1:
            _bad("hybrid.rope_base", "> 1", self.rope_base)
        if self.batched.problem != ProblemSettings() and self.batched.problem != self.problem:
            _bad("hybrid.batched.problem", "left at its defaults or equal to hybrid.problem",
                 repr(self.batched.problem))
        if self.batched.bounded and not self.bounded:
            _bad("hybrid.batched.bounded", "False or equal to hybrid.bounded", self.batched.bounded)
        self.batched.validate("hybrid.batched.")

    def min_local(self) -> int:
        """W in b(t): ``local_window`` in window mode, 1 in chunk mode."""
        return self.local_window if self.local == "window" else 1

    def local_width(self) -> int:
        """The most tokens the local path holds, min_local() + chunk - 1: the local part of the
        layer's state (a state-matched window adds the measured |S u E|)."""
        return self.min_local() + self.chunk - 1

    def memory_boundary(self, t: int) -> int:
        """b(t): the memory read by query t holds exactly the tokens s < b(t) (0: no memory)."""
        return max(t - self.min_local() + 1, 0) // self.chunk * self.chunk

    def batched_settings(self) -> BatchedSettings:
        """``batched`` with the hybrid's problem and bounded flag."""
        import dataclasses
        return dataclasses.replace(self.batched, problem=self.problem, bounded=self.bounded)
