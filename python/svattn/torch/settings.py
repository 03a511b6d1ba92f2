"""Settings of the torch paths (docs/python.md "Torch settings"). Each embeds the problem once as a
``svattn.ProblemSettings`` (kernel must be 'rbf'; ``problem.ridge`` is the problem's mu); the
batched solve's own ridge is ``solve_ridge``. The fields follow the C++ field tables
(include/svattn/torch/settings_fields.h, read through the op ``svattn::settings_fields``): their
docs and range checks are derived from the tables here; the defaults are written below and
python/tests/test_torch_settings_table.py checks them against the tables' defaults. The mapping of
Python fields to table rows (_TABLES, _RENAMED, _NOT_EXPOSED, _PYTHON_ONLY) is kept in this file
only."""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from .. import MemorySettings, ProblemSettings
from ._ops import ops

# --- The C++ field tables and the mapping of the Python fields to their rows ---------------------

#: The tables each Python class follows: (table, rows) with rows None for every row of the table.
_TABLES: Dict[str, List[Tuple[str, Optional[Tuple[str, ...]]]]] = {
    "ExactSettings": [],  # C++ ExactSettings has no field table
    "BatchedSettings": [("batched", None)],
    # rope and rope_base are AttentionConfig's in C++ (the layer's, not the hybrid settings').
    "HybridSettings": [("hybrid", None), ("attention", ("rope", "rope_base"))],
}

#: (table, C++ row) -> Python attribute path, where the names differ. The problem's rows are
#: svattn.ProblemSettings attributes, whose bandwidth is flat. (The batched solve's ridge is
#: `solve_ridge` in both; only the checkpoint's model JSON names it `batched.ridge`.)
_RENAMED: Dict[Tuple[str, str], str] = {
    ("hybrid", "problem.kernel.bandwidth"): "problem.bandwidth",
}

#: (table, C++ row) -> why the Python class does not have it.
_NOT_EXPOSED: Dict[Tuple[str, str], str] = {
    ("hybrid", "check_agreement"): "evaluation switch of the C++ layer; svattn.torch.certify_inference "
                                   "reports the agreement through op layer_certify",
    ("hybrid", "certify"): "evaluation switch of the C++ exact path; svattn.torch.certify_inference "
                           "runs the verifier through op layer_certify",
    ("hybrid", "exact_solver"): "the Python exact path has one solver (the op's); the C++ layer's "
                                "choice is for C++ comparisons",
    ("hybrid", "count_distinct_support"): "C++ diagnostics switch (svattn train / eval), not in the "
                                          "Python module's diagnostics",
}

#: Python fields with no table row, and why (their docs and checks are written here).
_PYTHON_ONLY: Dict[str, Dict[str, str]] = {
    "ExactSettings": {
        "problem": "the core's ProblemSettings (its own table, checked by test_settings_stub.py)",
        "bounded": "C++ ExactSettings has no field table",
    },
    "BatchedSettings": {
        "problem": "the owner's in C++ (HybridSettings.problem; the op takes bandwidth, C, ridge)",
        "bounded": "the owner's in C++ (HybridSettings.bounded), not a row of the batched table",
    },
    "HybridSettings": {
        "gate_override": "a std::optional in C++, which a table row cannot hold",
    },
}


@functools.lru_cache(maxsize=None)
def _table(name: str) -> Tuple[Dict[str, Any], ...]:
    return tuple(json.loads(ops.settings_fields(name)))


def settings_fields(name: str) -> List[Dict[str, Any]]:
    """The C++ field table ``name`` ('batched', 'hybrid', 'attention' or 'lm'): one dict per row
    with name (dotted when nested), type (the Python type), doc, requirement (as messages print it),
    default (of a default-constructed struct), lo/hi (None when unbounded), lo_open/hi_open,
    choices, custom (the row has its own check) and conditional (the range applies to some values
    only)."""
    return [dict(f) for f in _table(name)]


def table_rows(cls_name: str) -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    """(Python attribute path, table, row) for every row the class ``cls_name`` follows."""
    for table, names in _TABLES[cls_name]:
        for row in _table(table):
            if names is not None and row["name"] not in names:
                continue
            if (table, row["name"]) in _NOT_EXPOSED:
                continue
            yield _RENAMED.get((table, row["name"]), row["name"]), table, row


def _type_words(row: Dict[str, Any]) -> str:
    return {"bool": "a bool", "int": "an int", "float": "a float", "str": "a str"}[row["type"]]


def _in_range(row: Dict[str, Any], x: Any) -> bool:
    # include/svattn/field_table.h in_range: choices for a text, [lo, hi] (ends open or closed) for
    # a number, a float also finite (except where the row has its own check: rope_base > 1).
    if row["type"] == "str":
        return not row["choices"] or x in row["choices"]
    if row["type"] == "bool":
        return True
    if isinstance(x, float) and not math.isfinite(x) and not row["custom"]:
        return False
    lo, hi = row["lo"], row["hi"]
    if lo is not None and not (x > lo if row["lo_open"] else x >= lo):
        return False
    if hi is not None and not (x < hi if row["hi_open"] else x <= hi):
        return False
    return True


#: Rows whose Python value must also have the row's type (the others accept any number, as before).
_TYPED = ("local_window", "memory")


def _check_rows(obj: Any, cls_name: str, prefix: str) -> None:
    """Checks the class's own (undotted) fields against their rows; dotted ones (problem.*,
    batched.*) are checked by the object they belong to."""
    for name, _, row in table_rows(cls_name):
        if "." in name:
            continue
        x = getattr(obj, name)
        if name in _TYPED:
            want = bool if row["type"] == "bool" else int
            if isinstance(x, bool) != (want is bool) or not isinstance(x, want):
                _bad(prefix + name, _type_words(row) + ("" if want is bool else " " + row["requirement"]),
                     repr(x) if want is bool else x)
        if not _in_range(row, x):
            _bad(prefix + name, row["requirement"], repr(x) if isinstance(x, str) else x)


def _document(cls: type) -> type:
    """Appends the fields' docs to the class docstring: the table's for the rows, the
    _PYTHON_ONLY reason for the others."""
    lines = ["", "Fields (docs, requirements and defaults from the C++ field tables):", ""]
    for name, table, row in table_rows(cls.__name__):
        lines.append(f"    {name} ({row['type']}, {row['requirement']}; C++ {table}.{row['name']}): {row['doc']}")
    for name, why in _PYTHON_ONLY[cls.__name__].items():
        lines.append(f"    {name}: Python field ({why}).")
    cls.__doc__ = (cls.__doc__ or "").rstrip() + "\n" + "\n".join(lines) + "\n"
    return cls


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


@_document
@dataclass
class BatchedSettings:
    """Batch-stabilised path (docs/layers.md §2): batched FISTA + ridge-regularised bordered solve."""

    problem: ProblemSettings = field(default_factory=ProblemSettings)
    iterations: int = 200
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
        _check_rows(self, "BatchedSettings", prefix)

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


@_document
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
        _check_rows(self, "HybridSettings", "hybrid.")
        if self.gate_override is not None and not (0 <= self.gate_override <= 1):
            _bad("hybrid.gate_override", "in [0, 1]", self.gate_override)
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
