"""Independent verifier of an svattn memory export (docs/audit.md).

Written from docs/math.md alone: it imports nothing from svattn and shares none of its code.
Python standard library and numpy only. Run as ``python3 -m svattn_verify EXPORT_DIR``.
"""
from .verify import BadInput, Check, verify_export

__all__ = ["BadInput", "Check", "verify_export"]
