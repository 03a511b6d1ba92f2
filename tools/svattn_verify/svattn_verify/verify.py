"""The checks of an export, each from the section of docs/math.md it cites.

Problem (§1): minimise a'(K + mu I)a - diag(K)'a subject to sum(a) = 1, 0 <= a_i <= C.
KKT (§2): g_i = ((K + mu I)a)_i - K_ii/2 + b is 0 on margin, <= 0 at C, >= 0 at 0.
Hash (§6): SHA-256 of a two-level little-endian layout of settings, b, alpha and the tokens.
Tolerances (§7): |sum(a) - 1| <= 1e-10 and KKT signs within 1e-8 * max(1, max_i K_ii).
"""
import hashlib
import json
import math
import os
import struct

import numpy as np

SUM_TOL = 1e-10          # docs/math.md §7: |sum(alpha) - 1|
KKT_TOL = 1e-8           # docs/math.md §7: times max(1, max K_ii)
WARMUP_SLACK = 1e-9      # docs/math.md §1: warm-up when n*C <= 1 + 1e-9
KERNEL_CODE = {"rbf": 0, "linear": 1, "poly": 2}
PART_NAME = {0: "reserve", 1: "margin", 2: "error"}


class BadInput(Exception):
    """The export is missing a file or a file is malformed (exit 2)."""


class Check:
    """One named check: ok, what it found; informational checks never fail the verdict."""

    def __init__(self, name, ok, detail, informational=False):
        self.name, self.ok, self.detail, self.informational = name, bool(ok), detail, informational

    def word(self):
        if self.informational:
            return "established" if self.ok else "not established"
        return "ok" if self.ok else "FAILED"

    def as_dict(self):
        return {"name": self.name, "ok": self.ok, "result": self.word(), "detail": self.detail}


def _json(path):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise BadInput(f"{path}: missing") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: not JSON ({e})") from None


def _npy(path, kind, ndim):
    try:
        a = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise BadInput(f"{path}: missing") from None
    except ValueError as e:
        raise BadInput(f"{path}: not a .npy array ({e})") from None
    if a.dtype.kind != kind or a.ndim != ndim:
        raise BadInput(f"{path}: expected a {ndim}-D array of kind '{kind}', got {a.dtype} "
                       f"with shape {a.shape}")
    return a


def _field(obj, name, types, where):
    if name not in obj or not isinstance(obj[name], types) or isinstance(obj[name], bool):
        raise BadInput(f"{where}: field '{name}' missing or of the wrong type")
    return obj[name]


def load_export(d):
    """Every file of the export, with shapes checked against each other (BadInput otherwise)."""
    if not os.path.isdir(d):
        raise BadInput(f"{d}: not a directory")
    e = {"dir": d, "manifest": _json(os.path.join(d, "manifest.json")),
         "settings": _json(os.path.join(d, "settings.json")),
         "state": _json(os.path.join(d, "state.json"))}
    e["ids"] = _npy(os.path.join(d, "ids.npy"), "i", 1).astype("<i8")
    e["keys"] = _npy(os.path.join(d, "keys.npy"), "f", 2).astype("<f8")
    e["values"] = _npy(os.path.join(d, "values.npy"), "f", 2).astype("<f8")
    e["alpha"] = _npy(os.path.join(d, "alpha.npy"), "f", 1).astype("<f8")
    e["part"] = _npy(os.path.join(d, "partition.npy"), "i", 1)
    s = e["settings"]
    kernel = _field(s, "kernel", str, "settings.json")
    if kernel not in KERNEL_CODE:
        raise BadInput(f"settings.json: unknown kernel '{kernel}'")
    for name in ("bandwidth", "coef0", "C", "ridge"):
        _field(s, name, (int, float), "settings.json")
    for name in ("degree", "dim", "value_dim"):
        _field(s, name, int, "settings.json")
    _field(e["state"], "b", (int, float), "state.json")
    _field(e["state"], "state_sha256", str, "state.json")
    n = e["ids"].shape[0]
    for name in ("keys", "values", "alpha", "part"):
        if e[name].shape[0] != n:
            raise BadInput(f"{name}.npy has {e[name].shape[0]} rows, ids.npy {n}")
    if e["keys"].shape[1] != s["dim"] or e["values"].shape[1] != s["value_dim"]:
        raise BadInput("keys.npy/values.npy columns differ from settings.json dim/value_dim")
    return e


def check_files(e):
    """The manifest's SHA-256 of each file (integrity of the copy, not proof of its origin)."""
    files = e["manifest"].get("files")
    if not isinstance(files, list):
        raise BadInput("manifest.json: field 'files' missing")
    bad = []
    for f in files:
        path = os.path.join(e["dir"], str(f.get("name", "")))
        try:
            with open(path, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
        except OSError:
            raise BadInput(f"manifest.json lists '{f.get('name')}', which is missing") from None
        if digest != f.get("sha256"):
            bad.append(str(f.get("name")))
    return Check("files", not bad, "SHA-256 of every listed file matches the manifest" if not bad
                 else "differs from the manifest: " + ", ".join(bad))


def check_settings(s):
    """docs/math.md §1: sigma^2 normal (sigma in [1.5e-154, 1.3e154]), degree 1..64, coef0 >= 0,
    C > 0 finite, mu >= 0 finite."""
    problems = []
    if not (math.isfinite(s["C"]) and s["C"] > 0):
        problems.append(f"C = {s['C']!r}")
    if not (math.isfinite(s["ridge"]) and s["ridge"] >= 0):
        problems.append(f"ridge = {s['ridge']!r}")
    if s["kernel"] == "rbf" and not 1.5e-154 <= s["bandwidth"] <= 1.3e154:
        problems.append(f"bandwidth = {s['bandwidth']!r}")
    if s["kernel"] == "poly" and not (1 <= s["degree"] <= 64 and s["coef0"] >= 0):
        problems.append(f"degree/coef0 = {s['degree']}/{s['coef0']!r}")
    return Check("settings", not problems, "valid settings" if not problems
                 else "invalid: " + ", ".join(problems))


def kernel_diag(s, X):
    if s["kernel"] == "rbf":
        return np.ones(X.shape[0])
    dot = np.einsum("ij,ij->i", X, X)
    return dot if s["kernel"] == "linear" else (dot + s["coef0"]) ** s["degree"]


def kernel_block(s, X, S):
    """K(X, S) from its definition (§1). RBF: squared distances as |a|^2 + |b|^2 - 2 a.b on keys
    centred first (distances do not change; the centring keeps the cancellation at round-off of
    the spread, far below the 1e-8 tolerance), in row blocks."""
    if s["kernel"] != "rbf":
        dot = X @ S.T
        return dot if s["kernel"] == "linear" else (dot + s["coef0"]) ** s["degree"]
    centre = X.mean(axis=0) if X.shape[0] else 0.0
    Xc, Sc = X - centre, S - centre
    ss = np.einsum("ij,ij->i", Sc, Sc)
    out = np.empty((X.shape[0], S.shape[0]))
    step = max(1, 8_000_000 // max(1, S.shape[0]))
    for i in range(0, X.shape[0], step):
        xb = Xc[i:i + step]
        d2 = np.einsum("ij,ij->i", xb, xb)[:, None] + ss[None, :] - 2.0 * (xb @ Sc.T)
        out[i:i + step] = np.exp(-np.maximum(d2, 0.0) / s["bandwidth"] ** 2)
    return out


def is_warmup(n, C):
    return n > 0 and n * C <= 1 + WARMUP_SLACK


def check_ids(e):
    ids = e["ids"]
    ok = ids.size == 0 or (ids[0] >= 0 and bool(np.all(ids[1:] > ids[:-1])))
    n_manifest = e["manifest"].get("n", ids.size)
    ok = ok and n_manifest == ids.size
    return Check("ids", ok, f"{ids.size} ids, ascending and distinct" if ok
                 else "ids not ascending, negative, or not the manifest's count")


def check_partition(e):
    """§6: the partition is implied by alpha (0 reserve, C error, otherwise margin); in warm-up
    every token is error at 1/n (§1)."""
    a, part, C, n = e["alpha"], e["part"], e["settings"]["C"], e["ids"].size
    if is_warmup(n, C):
        implied = np.full(n, 2)
    else:
        implied = np.where(a == 0, 0, np.where(a == C, 2, 1))
    bad = np.nonzero(implied != part)[0]
    st = e["state"]
    counts = {k: int(np.sum(part == v)) for v, k in PART_NAME.items()}
    ok = bad.size == 0 and all(st.get(k, counts[k]) == counts[k] for k in counts)
    if ok:
        return Check("partition", True, "margin {margin}, error {error}, reserve {reserve}, as "
                     "alpha implies".format(**counts))
    where = f"id {int(e['ids'][bad[0]])}" if bad.size else "the counts in state.json"
    return Check("partition", False, f"stored partition disagrees with alpha at {where}")


def check_feasibility(e):
    """§1/§7: sum(alpha) = 1 within 1e-10, 0 <= alpha <= C (warm-up: alpha = 1/n); empty: b = 0."""
    a, C, n, b = e["alpha"], e["settings"]["C"], e["ids"].size, e["state"]["b"]
    if n == 0:
        return Check("feasibility", b == 0, "empty memory, b = 0" if b == 0 else f"empty memory "
                     f"with b = {b!r}")
    if not (np.all(np.isfinite(a)) and math.isfinite(b)):
        return Check("feasibility", False, "non-finite alpha or b")
    total = math.fsum(a.tolist())
    if is_warmup(n, C):
        box_ok = bool(np.all(a == 1.0 / n))
        box = "alpha = 1/n everywhere (warm-up)"
    else:
        box_ok = bool(np.all(a >= 0) and np.all(a <= C))
        box = f"0 <= alpha <= C = {C!r}"
    ok = abs(total - 1) <= SUM_TOL and box_ok
    return Check("feasibility", ok, f"|sum(alpha) - 1| = {abs(total - 1):.3g} (tol {SUM_TOL:g}); "
                 + box + ("" if box_ok else " VIOLATED"))


def check_kkt(e):
    """§2/§7: the sign of g_i on every token within 1e-8 * max(1, max K_ii)."""
    s, X, a, b = e["settings"], e["keys"], e["alpha"], e["state"]["b"]
    n = a.size
    if n == 0:
        return Check("kkt_signs", True, "empty memory: no condition")
    sup = np.nonzero(a != 0)[0]
    diag = kernel_diag(s, X)
    g = kernel_block(s, X, X[sup]) @ a[sup] + s["ridge"] * a - diag / 2 + b
    if is_warmup(n, s["C"]):
        viol = np.maximum(0, g)
    else:
        viol = np.where(a == 0, np.maximum(0, -g), np.where(a == s["C"], np.maximum(0, g),
                                                            np.abs(g)))
    viol = np.where(np.isfinite(g), viol, np.inf)
    tol = KKT_TOL * max(1.0, float(np.max(diag)))
    worst = int(np.argmax(viol))
    ok = viol[worst] <= tol
    return Check("kkt_signs", ok, f"max violation {viol[worst]:.3g} at id {int(e['ids'][worst])} "
                 f"over {n} tokens (tolerance {tol:.3g})")


def check_uniqueness(e):
    """§1/§7: warm-up (one feasible point), mu > 0 (strictly convex), or RBF on distinct keys
    (positive definite Gram); otherwise not established."""
    s, n = e["settings"], e["ids"].size
    if n == 0:
        ok, why = True, "empty memory: one state"
    elif is_warmup(n, s["C"]):
        ok, why = True, "warm-up: n*C <= 1 leaves a single feasible point"
    elif s["ridge"] > 0:
        ok, why = True, "ridge > 0: the objective is strictly convex"
    elif s["kernel"] == "rbf":
        ok = np.unique(e["keys"], axis=0).shape[0] == n
        why = ("RBF Gram matrix of distinct keys is positive definite" if ok
               else "duplicate keys with ridge 0: the optimum may not be unique")
    else:
        ok, why = False, "ridge 0 with a linear/poly kernel"
    return Check("uniqueness", ok, why, informational=True)


def check_status(e, unique):
    st, n, C = e["state"], e["ids"].size, e["settings"]["C"]
    want = "empty" if n == 0 else "warmup" if is_warmup(n, C) else "optimal"
    status = st.get("status")
    ok = status == want or (status == "singular" and not unique.ok)
    ok = ok and bool(st.get("warmup", False)) == (want == "warmup")
    return Check("status", ok, f"status '{status}'" + ("" if ok else f", expected '{want}'"))


def state_hash(e):
    """§6: SHA-256 of the top level with one SHA-256 digest per bucket (id >> 8)."""
    s, ids, a = e["settings"], e["ids"], e["alpha"]
    n, d, dv = ids.size, e["keys"].shape[1], e["values"].shape[1]
    top = bytearray(b"SVATTN-STATE-v2\x00") + struct.pack("<B", KERNEL_CODE[s["kernel"]])
    if s["kernel"] == "rbf":
        top += struct.pack("<d", s["bandwidth"])
    if s["kernel"] == "poly":
        top += struct.pack("<id", s["degree"], s["coef0"])
    top += struct.pack("<ddQIId", s["C"], s["ridge"], n, d, dv, e["state"]["b"])
    nz = np.nonzero(a.view("<u8") != 0)[0]
    top += struct.pack("<Q", nz.size)
    for t in nz:
        top += struct.pack("<qd", int(ids[t]), float(a[t]))
    rows = np.zeros(n, dtype=[("id", "<i8"), ("k", "<f8", (d,)), ("v", "<f8", (dv,))])
    rows["id"], rows["k"], rows["v"] = ids, e["keys"], e["values"]
    buckets, first, count = np.unique(ids >> 8, return_index=True, return_counts=True)
    top += struct.pack("<Q", buckets.size)
    for bucket, f, c in zip(buckets.tolist(), first.tolist(), count.tolist()):
        head = b"SVATTN-BUCKET-v1\x00" + struct.pack("<qI", bucket, c)
        digest = hashlib.sha256(head + rows[f:f + c].tobytes()).digest()
        top += struct.pack("<qI", bucket, c) + digest
    return hashlib.sha256(bytes(top)).hexdigest()


def check_hash(e, recomputed):
    stated = e["state"]["state_sha256"]
    manifest = e["manifest"].get("state_sha256", stated)
    ok = recomputed == stated == manifest
    detail = (f"{recomputed} recomputed from the exported bytes (alpha and b as exported: the "
              "hash commits to them; their optimality is the kkt_signs check)")
    return Check("hash", ok, detail if ok else f"recomputed {recomputed[:16]}…, state.json says "
                 f"{stated[:16]}…, manifest {str(manifest)[:16]}…")


def check_certificate(e, path, recomputed):
    """A removal certificate's state after must be this export's state, its settings these
    settings, and no removed id may remain."""
    cert = _json(path)
    if isinstance(cert.get("certificate"), dict):  # `memory forget --json` output
        cert = cert["certificate"]
    if cert.get("certificate") != "svattn-removal-v1" or not isinstance(cert.get("after"), dict):
        raise BadInput(f"{path}: not an svattn removal certificate")
    s, cs, after = e["settings"], cert.get("settings", {}), cert["after"]
    problems = []
    if after.get("state_sha256") != recomputed:
        problems.append("its state after is not this export's state")
    if after.get("n") != e["ids"].size:
        problems.append(f"it leaves {after.get('n')} tokens, the export has {e['ids'].size}")
    for k in ("kernel", "C", "ridge") + (("bandwidth",) if s["kernel"] == "rbf" else ()) + (
            ("degree", "coef0") if s["kernel"] == "poly" else ()):
        if cs.get(k) != s[k]:
            problems.append(f"setting {k} differs")
    left = np.intersect1d(np.asarray(cert.get("removed_ids", []), dtype=np.int64), e["ids"])
    if left.size:
        problems.append(f"removed id {int(left[0])} is still in the export")
    return Check("certificate", not problems, "state after, settings and removed ids agree "
                 "with the export" if not problems else "; ".join(problems))


def verify_export(d, certificate=None):
    """Every check of the export directory `d` (and the certificate), in order."""
    e = load_export(d)
    checks = [check_files(e), check_settings(e["settings"]), check_ids(e)]
    if not checks[1].ok:
        return checks
    recomputed = state_hash(e)
    unique = check_uniqueness(e)
    checks += [check_hash(e, recomputed), check_partition(e), check_feasibility(e),
               check_kkt(e), unique, check_status(e, unique)]
    if certificate:
        checks.append(check_certificate(e, certificate, recomputed))
    return checks
