"""svattn: Support-Vector Attention -- an attention memory whose weights are the dual coefficients of
a one-class SVDD fitted online to the keys, with exact (bit-identical) forgetting and certificates.

The core (``svattn.Memory``, ``svattn.solve``, ``svattn.verify_state``, ``svattn.Store``) needs only
numpy; ``svattn.torch`` holds the PyTorch op and layers. See docs/python.md.
"""
from __future__ import annotations

import json as _json
from typing import Any, Optional

from . import _core
from ._core import (  # noqa: F401  (re-exported)
    AlreadyExistsError,
    BatchDiagnostics,
    BatchResult,
    BatchSettings,
    FormatError,
    KernelSettings,
    KktReport,
    Memory,
    MemorySettings,
    OpDiagnostics,
    OptimalityCheck,
    Partition,
    ProblemSettings,
    RemovalCertificate,
    ResolveCheck,
    State,
    StateSummary,
    StoreBusyError,
    StoreError,
    StoreFullError,
    Tolerances,
    VerifyReport,
)
from ._store import HAVE_STORE, Store, erasure_receipt, export_memory, store_token_id

from ._version import __version__  # noqa: F401  (generated from CMakeLists.txt)

__all__ = [
    "AlreadyExistsError", "BatchDiagnostics", "BatchResult", "BatchSettings", "FormatError",
    "KernelSettings", "KktReport", "Memory", "MemorySettings", "OpDiagnostics", "OptimalityCheck",
    "Partition", "ProblemSettings", "RemovalCertificate", "ResolveCheck", "State", "StateSummary",
    "Store", "StoreBusyError", "StoreError",
    "StoreFullError", "Tolerances", "VerifyReport", "removal_certificate", "solve",
    "store_token_id", "verify_state", "HAVE_STORE", "erasure_receipt", "export_memory",
]


def _to_json(self: Any, **kwargs: Any) -> str:
    return _json.dumps(_jsonable(self.to_dict()), **kwargs)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "tolist"):
        return x.tolist()
    return x


for _cls in (BatchDiagnostics, BatchResult, KktReport, OpDiagnostics, Partition, State, VerifyReport,
             KernelSettings, ProblemSettings, Tolerances, MemorySettings, BatchSettings):
    _cls.to_json = _to_json  # type: ignore[attr-defined]


def _batch_settings(settings: Any, kwargs: dict) -> BatchSettings:
    if settings is None:
        return BatchSettings(**kwargs)
    if kwargs:
        raise TypeError("solve: pass either settings or problem keywords, not both")
    if isinstance(settings, BatchSettings):
        return settings
    if isinstance(settings, (MemorySettings, ProblemSettings)):
        problem = settings if isinstance(settings, ProblemSettings) else settings.problem
        tol = settings.tolerances if isinstance(settings, MemorySettings) else Tolerances()
        return BatchSettings(problem=problem, tolerances=tol)
    raise TypeError(f"solve: settings must be BatchSettings, MemorySettings or ProblemSettings, "
                    f"got {type(settings).__name__}")


def solve(keys: Any, settings: Any = None, *, values: Any = None, ids: Any = None,
          exclude: Any = None, **problem: Any) -> BatchResult:
    """Batch reference solve (docs/math.md §9) of the tokens (rows of ``keys``; ids default to 0..n-1).

    ``settings`` is a BatchSettings, MemorySettings or ProblemSettings; or pass the problem's
    fields as keywords (``kernel``, ``bandwidth``, ``C``, ``ridge``, ...). ``exclude`` drops the
    given ids first (``svattn solve --exclude``). The GIL is released while solving.
    """
    import numpy as np

    s = _batch_settings(settings, problem)
    keys = np.asarray(keys)
    if keys.ndim != 2:
        raise ValueError(f"keys: expected a 2-D array, got shape {keys.shape}")
    ids_arr = np.arange(keys.shape[0], dtype=np.int64) if ids is None else np.asarray(ids)
    if exclude is not None:
        keep = ~np.isin(ids_arr, np.asarray(list(exclude), dtype=np.int64))
        keys = keys[keep]
        values = None if values is None else np.asarray(values)[keep]
        ids_arr = ids_arr[keep]
    return _core._solve(keys, s, values, ids_arr)


def verify_state(keys: Any, state: State, *, values: Any = None, ids: Any = None,
                 tolerances: Optional[Tolerances] = None, resolve: bool = False) -> VerifyReport:
    """Checks ``state`` against the tokens without trusting the solver that made it (docs/math.md §7):
    feasibility, KKT signs on every token, the hash, and with ``resolve`` a batch re-solve."""
    return _core._verify_state(keys, state, tolerances or Tolerances(), resolve, values, ids)


def removal_certificate(before: State, after_memory: Memory, removed: Any, *,
                        diagnostics: Optional[OpDiagnostics] = None, record_id: str = "",
                        optimality_check: bool = True, allow_reference: bool = True,
                        resolve: bool = False, probes: Any = None) -> RemovalCertificate:
    """Certificate of removing ``removed`` from a memory whose state was ``before`` (docs/math.md §7).

    ``after_memory`` is the memory after the removal and ``diagnostics`` the removal's
    OpDiagnostics (default: the memory's totals). ``optimality_check`` runs the independent check
    of the state after removal (by reference to ``before`` when the removal moved no coefficient
    and ``allow_reference``); ``resolve`` adds a from-scratch batch re-solve comparison, with
    readouts compared on the rows of ``probes``.
    """
    diag = diagnostics if diagnostics is not None else after_memory.totals
    return _core._removal_certificate(before, after_memory, removed, record_id, diag,
                                      optimality_check, allow_reference, resolve, probes)
