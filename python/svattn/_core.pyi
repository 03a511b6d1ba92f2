"""Type stubs of the svattn._core extension (python/src/*.cpp). Arrays are numpy float64 /
int64; inputs accept any float32/float64 array (integer arrays are promoted). The `#:` docs of the
settings classes' fields are the C++ field tables' (python/tests/test_settings_stub.py checks them)."""
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

ArrayLike = npt.ArrayLike
Ids = Union[Sequence[int], npt.NDArray[np.integer]]

class FormatError(ValueError): ...
class AlreadyExistsError(KeyError): ...
class StoreError(RuntimeError): ...
class StoreBusyError(StoreError): ...
class StoreFullError(StoreError): ...

class KernelSettings:
    #: 'rbf' exp(-|a-b|^2/bandwidth^2) | 'linear' a.b | 'poly' (a.b + coef0)^degree. Must be one of rbf | linear | poly.
    type: str
    #: RBF bandwidth sigma. Must be finite and in [1.5e-154, 1.3e+154] (bandwidth^2 must be a normal fp64 number).
    bandwidth: float
    #: Polynomial degree. Must be in [1, 64].
    degree: int
    #: Polynomial offset (keeps K positive semidefinite). Must be finite and >= 0.
    coef0: float
    def __init__(self, *, type: str = "rbf", bandwidth: Optional[float] = None,
                 degree: Optional[int] = None, coef0: Optional[float] = None) -> None: ...
    def validate(self) -> None: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class _FlatProblem:
    #: 'rbf' exp(-|a-b|^2/bandwidth^2) | 'linear' a.b | 'poly' (a.b + coef0)^degree. Must be one of rbf | linear | poly.
    kernel: str
    #: RBF bandwidth sigma. Must be finite and in [1.5e-154, 1.3e+154] (bandwidth^2 must be a normal fp64 number).
    bandwidth: float
    #: Polynomial degree. Must be in [1, 64].
    degree: int
    #: Polynomial offset (keeps K positive semidefinite). Must be finite and >= 0.
    coef0: float
    #: Box bound; fixed for the life of a memory (n*C <= 1: warm-up). Must be finite and > 0.
    C: float
    #: Ridge mu added to the kernel diagonal. Must be finite and >= 0.
    ridge: float

class ProblemSettings(_FlatProblem):
    kernel_settings: KernelSettings
    def __init__(self, *, kernel: Optional[str] = None, bandwidth: Optional[float] = None,
                 degree: Optional[int] = None, coef0: Optional[float] = None,
                 C: Optional[float] = None, ridge: Optional[float] = None) -> None: ...
    def validate(self) -> None: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class Tolerances:
    #: Reserve/error threshold of a coefficient. Must be in (0, 1e-3).
    alpha_tol: float
    #: Rounding floor of the gradient checks. Must be in (0, 1e-2).
    kkt_tol: float
    #: Partition repairs allowed in one canonical refinement. Must be >= 1.
    max_refine_iterations: int
    def __init__(self, *, alpha_tol: Optional[float] = None, kkt_tol: Optional[float] = None,
                 max_refine_iterations: Optional[int] = None) -> None: ...
    def validate(self) -> None: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class MemorySettings(_FlatProblem):
    problem: ProblemSettings
    tolerances: Tolerances
    #: 'audit' (every token kept) | 'bounded' (reserve tokens evicted). Must be one of audit | bounded.
    mode: str
    #: Bounded mode: reserve tokens are evicted only above this size (0: always). Must be a non-negative integer.
    token_budget: int
    #: Operations between full refactorisations of the bordered inverse. Must be >= 1.
    refactor_period: int
    #: Path steps in one operation before it repairs by a batch solve. Must be >= 1.
    max_steps_per_op: int
    #: Schur-complement guard of entrants to the margin set. Must be in (0, 1e-2).
    schur_tol: float
    def __init__(self, *, kernel: Optional[str] = None, bandwidth: Optional[float] = None,
                 degree: Optional[int] = None, coef0: Optional[float] = None,
                 C: Optional[float] = None, ridge: Optional[float] = None,
                 problem: Optional[ProblemSettings] = None,
                 tolerances: Optional[Tolerances] = None, mode: str = "audit",
                 token_budget: Optional[int] = None, refactor_period: Optional[int] = None,
                 max_steps_per_op: Optional[int] = None, schur_tol: Optional[float] = None) -> None: ...
    def validate(self) -> None: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class BatchSettings(_FlatProblem):
    problem: ProblemSettings
    tolerances: Tolerances
    #: SMO stopping gap relative to max(1, max K_ii). Must be in (0, 1e-2).
    smo_tol: float
    #: SMO iteration cap (0: max(1e7, 100 n)). Must be >= 0.
    max_smo_iterations: int
    #: Kernel row cache in MiB (LRU). Must be >= 1.
    cache_mib: int
    def __init__(self, *, kernel: Optional[str] = None, bandwidth: Optional[float] = None,
                 degree: Optional[int] = None, coef0: Optional[float] = None,
                 C: Optional[float] = None, ridge: Optional[float] = None,
                 problem: Optional[ProblemSettings] = None,
                 tolerances: Optional[Tolerances] = None, smo_tol: Optional[float] = None,
                 max_smo_iterations: Optional[int] = None, cache_mib: Optional[int] = None) -> None: ...
    def validate(self) -> None: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class Partition:
    @property
    def margin(self) -> npt.NDArray[np.int64]: ...
    @property
    def error(self) -> npt.NDArray[np.int64]: ...
    @property
    def reserve(self) -> npt.NDArray[np.int64]: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class KktReport:
    max_violation: float
    sum_error: float
    box_violation: float
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class State:
    settings: ProblemSettings
    dim: int
    value_dim: int
    @property
    def ids(self) -> npt.NDArray[np.int64]: ...
    @property
    def alpha(self) -> npt.NDArray[np.float64]: ...
    b: float
    partition: Partition
    kkt: KktReport
    @property
    def status(self) -> str: ...
    warmup: bool
    state_sha256: str
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class OpDiagnostics:
    ops: int
    events: int
    zero_steps: int
    refused_entrants: int
    refactorizations: int
    canonical_solves: int
    repairs: int
    batch_fallbacks: int
    boundary_solves: int
    tracked: int
    kernel_evaluations: int
    @property
    def status(self) -> str: ...
    seconds: float
    canonical_seconds: float
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class Memory:
    def __init__(self, settings: MemorySettings, dim: int, value_dim: Optional[int] = None) -> None: ...
    def add(self, id: int, key: ArrayLike, value: Optional[ArrayLike] = None) -> OpDiagnostics: ...
    def add_batch(self, ids: Ids, keys: ArrayLike, values: Optional[ArrayLike] = None) -> OpDiagnostics: ...
    def remove(self, id: int) -> OpDiagnostics: ...
    def remove_batch(self, ids: Ids) -> OpDiagnostics: ...
    def evict_reserve(self) -> npt.NDArray[np.int64]: ...
    @overload
    def readout(self, queries: npt.NDArray[Any]) -> npt.NDArray[np.float64]: ...
    @overload
    def readout(self, queries: ArrayLike) -> npt.NDArray[np.float64]: ...
    def decision(self, queries: ArrayLike) -> Union[float, npt.NDArray[np.float64]]: ...
    def state(self) -> State: ...
    @property
    def state_sha256(self) -> str: ...
    @property
    def partition(self) -> Partition: ...
    def alpha(self, id: int) -> float: ...
    def tokens(self) -> Tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
    def __contains__(self, id: int) -> bool: ...
    def __len__(self) -> int: ...
    @property
    def dim(self) -> int: ...
    @property
    def value_dim(self) -> int: ...
    @property
    def settings(self) -> MemorySettings: ...
    @property
    def status(self) -> str: ...
    @property
    def totals(self) -> OpDiagnostics: ...
    @property
    def evictions(self) -> int: ...
    def check_invariants(self) -> None: ...
    def save(self, path: str) -> None: ...
    @staticmethod
    def load(path: str) -> "Memory": ...
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> "Memory": ...
    def copy(self) -> "Memory": ...

class BatchDiagnostics:
    smo_iterations: int
    refine_iterations: int
    smo_seconds: float
    refine_seconds: float
    kernel_rows_computed: int
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class BatchResult:
    state: State
    diagnostics: BatchDiagnostics
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class VerifyReport:
    @property
    def ok(self) -> bool: ...
    feasible: bool
    kkt_ok: bool
    unique: bool
    hash_ok: bool
    uniqueness_reason: str
    error: str
    kkt: KktReport
    resolved: bool
    resolve_hash_equal: bool
    resolve_partition_equal: bool
    resolve_max_abs_dalpha: float
    resolve_sha256: str
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self, **kwargs: Any) -> str: ...

class StateSummary:
    n: int
    margin: int
    error: int
    reserve: int
    state_sha256: str
    @property
    def status(self) -> str: ...
    kkt: KktReport

class OptimalityCheck:
    performed: bool
    @property
    def argument(self) -> str: ...
    checks: List[str]
    feasible: bool
    kkt_ok: bool
    max_kkt_violation: float
    unique: bool
    uniqueness_reason: str
    hash_ok: bool
    reference_sha256: str
    note: str
    @property
    def ok(self) -> bool: ...

class ResolveCheck:
    performed: bool
    retrained_sha256: str
    hash_equal: bool
    partition_equal: bool
    max_abs_dalpha: float
    max_abs_ddecision: float
    max_abs_dreadout: float
    probes: int
    retrain_seconds: float

class StoreErasure:
    path: str
    memory: str
    record: int
    record_was_suspended: bool
    token_rows_erased: int
    tokens_removed_from_memory: int
    secure_delete: bool
    encryption: str
    data_key_id: str
    data_key_sha256: str
    data_key_destroyed: bool
    bounds_group: int
    bounds_key_id: str
    bounds_key_sha256: str
    bounds_key_destroyed: bool
    erasure_basis: str

class RemovalCertificate:
    certificate: str
    @property
    def mode(self) -> str: ...
    settings: ProblemSettings
    record_id: str
    @property
    def removed_ids(self) -> npt.NDArray[np.int64]: ...
    before: StateSummary
    after: StateSummary
    solver: OpDiagnostics
    evictions: int
    verify: OptimalityCheck
    check: ResolveCheck
    store: Optional[StoreErasure]
    scope: str
    limits: str
    def to_json(self, indent: int = -1) -> str: ...
    def to_dict(self) -> Dict[str, Any]: ...
    @staticmethod
    def from_json(text: str) -> "RemovalCertificate": ...

class AuditEntry:
    seq: int
    time_utc: str
    operation: str
    memory: str
    record: int
    token_count: int
    state_before: str
    state_after: str
    certificate: str
    prev_hash: str
    entry_hash: str
    def to_dict(self) -> Dict[str, Any]: ...

class RecordInfo:
    record: int
    tokens: int
    suspended: bool

class MemoryInfo:
    name: str
    settings: MemorySettings
    dim: int
    value_dim: int
    tokens: int
    stored_tokens: int
    records: int
    suspended_records: int
    state_sha256: str
    last_audit_seq: int

class MemoryVerification:
    name: str
    tokens: int
    stored_sha256: str
    resolved_sha256: str
    resolve_equal: bool
    report: VerifyReport
    audit_consistent: bool
    @property
    def ok(self) -> bool: ...

class StoreVerification:
    integrity_ok: bool
    chain_ok: bool
    audit_entries: int
    audit_head: str
    memories: List[MemoryVerification]
    problems: List[str]
    @property
    def ok(self) -> bool: ...
    def to_dict(self) -> Dict[str, Any]: ...

POSITION_BITS: int
def store_token_id(record: int, position: int) -> int: ...
def export_memory(path: str, memory: str, out_dir: str,
                  master_key_file: str = "") -> Dict[str, Any]: ...
def erasure_receipt(path: str, memory: str, record: int, reason: str = "",
                    backups: List[str] = ..., format: str = "md",
                    master_key_file: str = "") -> Dict[str, Any]: ...

class _Store:
    def __init__(self, path: str, *, create: bool = False, busy_timeout_ms: int = 5000,
                 check_on_open: bool = False, certificate_check: bool = True,
                 certificate_reference: bool = True, certificate_resolve: bool = False,
                 certificate_probes: int = 8, master_key_file: str = "",
                 master_key_env: str = "") -> None: ...
    def __getattr__(self, name: str) -> Any: ...

def _solve(keys: ArrayLike, settings: BatchSettings, values: Optional[ArrayLike] = None,
           ids: Optional[Ids] = None) -> BatchResult: ...
def _verify_state(keys: ArrayLike, state: State, tolerances: Tolerances, resolve: bool,
                  values: Optional[ArrayLike] = None, ids: Optional[Ids] = None) -> VerifyReport: ...
def _removal_certificate(before: State, after_memory: Memory, removed: Ids, record_id: str,
                         diagnostics: OpDiagnostics, optimality_check: bool,
                         allow_reference: bool, resolve: bool,
                         probes: Optional[ArrayLike] = None) -> RemovalCertificate: ...
