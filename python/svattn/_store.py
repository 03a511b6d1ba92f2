"""svattn.Store: the audited SQLite memory store (docs/store.md) as a context manager."""
from __future__ import annotations

import os
from typing import Any, Iterable, List, Optional

from . import _core

HAVE_STORE = hasattr(_core, "_Store")
"""False when the extension was built without the store (SVATTN_BUILD_STORE=OFF)."""

if HAVE_STORE:
    store_token_id = _core.store_token_id
else:  # pragma: no cover - store-less builds
    def store_token_id(record: int, position: int) -> int:
        raise RuntimeError("svattn was built without the store (SVATTN_BUILD_STORE=OFF)")


def export_memory(path: str, memory: str, out_dir: str, *,
                  master_key_file: Optional[str] = None) -> dict:
    """Writes memory ``memory``'s remaining tokens, stored state, settings and a manifest into
    ``out_dir`` (new or empty) for the independent verifier ``tools/svattn_verify``
    (docs/audit.md "Export"). Returns what was written: directory, tokens, records, state_sha256,
    files."""
    if not HAVE_STORE:
        raise RuntimeError("svattn was built without the store (SVATTN_BUILD_STORE=OFF)")
    return _core.export_memory(str(path), memory, str(out_dir), master_key_file or "")


def erasure_receipt(path: str, memory: str, record: int, *, reason: str = "",
                    backups: Iterable[str] = (), format: str = "md",
                    master_key_file: Optional[str] = None) -> dict:
    """The erasure receipt of ``record`` (docs/audit.md "Erasure receipt"): a dict with ``ok``,
    ``failure`` (the first failed check, "" when ok), ``receipt`` (every field and check) and
    ``text`` (the Markdown or self-contained HTML page; None when a check failed: a refused
    receipt is never rendered)."""
    if not HAVE_STORE:
        raise RuntimeError("svattn was built without the store (SVATTN_BUILD_STORE=OFF)")
    return _core.erasure_receipt(str(path), memory, int(record), reason,
                                 [str(b) for b in backups], format, master_key_file or "")


class Store:
    """An audited store of named memories (one SQLite file). Every operation is one transaction and
    one audit entry; ``forget_record`` erases a record exactly and returns its certificate.

    ``with svattn.Store("s.db", create=True) as st: ...`` closes the store on exit. Several
    processes may open the same file; SQLite locks serialise them (StoreBusyError after
    ``busy_timeout_ms``). Every call releases the GIL.
    """

    def __init__(self, path: str, create: bool = False, *, busy_timeout_ms: int = 5000,
                 check_on_open: bool = False, certificate_check: bool = True,
                 certificate_reference: bool = True, certificate_resolve: bool = False,
                 certificate_probes: int = 8, master_key_file: Optional[str] = None,
                 master_key_env: Optional[str] = None) -> None:
        """``master_key_file`` (a file of 64 hex digits, mode 0600/0400) or ``master_key_env``
        (the name of a variable holding them) gives the master key that wraps the data keys
        (docs/store.md "Master key"); with neither, the CLI's defaults apply: the file named by
        ``SVATTN_MASTER_KEY_FILE``, else the key in ``SVATTN_MASTER_KEY`` when it is set."""
        if not HAVE_STORE:
            raise RuntimeError("svattn was built without the store (SVATTN_BUILD_STORE=OFF)")
        if master_key_file is None and master_key_env is None:
            if os.environ.get("SVATTN_MASTER_KEY_FILE"):
                master_key_file = os.environ["SVATTN_MASTER_KEY_FILE"]
            elif "SVATTN_MASTER_KEY" in os.environ:
                master_key_env = "SVATTN_MASTER_KEY"
        self._s = _core._Store(str(path), create=create, busy_timeout_ms=busy_timeout_ms,
                               check_on_open=check_on_open, certificate_check=certificate_check,
                               certificate_reference=certificate_reference,
                               certificate_resolve=certificate_resolve,
                               certificate_probes=certificate_probes,
                               master_key_file=str(master_key_file or ""),
                               master_key_env=master_key_env or "")

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Checkpoints the WAL and closes the file; later calls raise ValueError."""
        self._s.close()

    @property
    def path(self) -> str:
        return self._s.path

    def create_memory(self, name: str, settings: "_core.MemorySettings", dim: int,
                      value_dim: Optional[int] = None) -> "_core.AuditEntry":
        """Creates an empty memory (AlreadyExistsError if the name is taken)."""
        return self._s.create_memory(name, settings, dim, value_dim)

    def add_record(self, name: str, record: int, keys: Any, values: Any = None) -> "_core.AuditEntry":
        """Adds record ``record``: token ids ``record << 23 | row`` (values default to the keys)."""
        return self._s.add_record(name, record, keys, values)

    def import_records(self, name: str, records: Iterable[Any]) -> List["_core.AuditEntry"]:
        """Adds every ``(record, keys)`` or ``(record, keys, values)`` item (one transaction each)."""
        return self._s.import_records(name, records)

    def forget_record(self, name: str, record: int) -> "_core.RemovalCertificate":
        """Erases a record: exact removal of its tokens, secure deletion of its rows, and the
        typed certificate (also written to the audit log)."""
        return self._s.forget_record(name, record)

    def suspend(self, name: str, record: int) -> "_core.AuditEntry":
        """Reversible exclusion: the record's tokens leave the memory but stay in the file."""
        return self._s.suspend(name, record)

    def resume(self, name: str, record: int) -> "_core.AuditEntry":
        """Adds a suspended record's tokens back."""
        return self._s.resume(name, record)

    def query(self, name: str, queries: Any) -> Any:
        """Readouts ``(m, value_dim)`` of the rows of ``queries``."""
        return self._s.query(name, queries)

    def decision(self, name: str, queries: Any) -> Any:
        """Decision function f(q) of the rows of ``queries``."""
        return self._s.decision(name, queries)

    def memory(self, name: str) -> "_core.Memory":
        """A copy of the named memory."""
        return self._s.memory(name)

    def memory_names(self) -> List[str]:
        return self._s.memory_names()

    def memory_info(self, name: str) -> "_core.MemoryInfo":
        return self._s.memory_info(name)

    def records(self, name: str) -> List["_core.RecordInfo"]:
        return self._s.records(name)

    def stored_state(self, name: str) -> "_core.State":
        """The canonical state as stored in the file."""
        return self._s.stored_state(name)

    def verify(self) -> "_core.StoreVerification":
        """Integrity, audit chain and every memory re-solved from the file alone."""
        return self._s.verify()

    def audit(self) -> List["_core.AuditEntry"]:
        """The audit log, oldest first."""
        return self._s.audit()
