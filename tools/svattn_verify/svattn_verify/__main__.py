"""Command line: python3 -m svattn_verify EXPORT_DIR [--certificate CERT.json] [--json].

Exit 0: every check passed; 1: a check failed; 2: bad input (missing or malformed files).
"""
import argparse
import json
import sys

from .verify import BadInput, verify_export


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 -m svattn_verify",
        description="Check an svattn memory export from docs/math.md alone (numpy only).")
    p.add_argument("export_dir", help="directory written by `svattn memory export`")
    p.add_argument("--certificate", help="a removal certificate (JSON) to check against the export")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    try:
        a = p.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        checks = verify_export(a.export_dir, a.certificate)
    except BadInput as e:
        print(f"svattn_verify: bad input: {e}", file=sys.stderr)
        return 2
    ok = all(c.ok or c.informational for c in checks)
    if a.json:
        print(json.dumps({"ok": ok, "checks": [c.as_dict() for c in checks]}, indent=2))
    else:
        for c in checks:
            print(f"{c.word():<14} {c.name:<16} {c.detail}")
        failed = [c.name for c in checks if not (c.ok or c.informational)]
        print("verdict        " + ("ok" if ok else "FAILED (" + ", ".join(failed) + ")"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
