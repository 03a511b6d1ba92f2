"""The settings classes follow the C++ field tables: the stub's field docs and types, every field
through the dict, pickling and keyword round trips, and a bad value refused naming the field."""
import os
import pickle
import re
from pathlib import Path

import pytest

import svattn
from svattn import _core

CLASSES = ["KernelSettings", "_FlatProblem", "Tolerances", "MemorySettings", "BatchSettings"]


def stub_text():
    installed = Path(svattn.__file__).parent / "_core.pyi"
    if installed.exists():
        return installed.read_text()
    return (Path(os.environ["SVATTN_SOURCE_DIR"]) / "python" / "svattn" / "_core.pyi").read_text()


def stub_fields(cls):
    """{name: (type, doc)} of the attributes of `cls` in the stub (doc: its `#:` line)."""
    text = stub_text()
    body = re.search(r"^class %s\b.*?:\n(.*?)(?=^\S|\Z)" % re.escape(cls), text, re.S | re.M).group(1)
    out, doc = {}, None
    for line in body.splitlines():
        m = re.match(r"    #: (.*)$", line)
        if m:
            doc = m.group(1)
            continue
        m = re.match(r"    (\w+): (\w+)$", line)
        if m:
            out[m.group(1)] = (m.group(2), doc)
        doc = None
    return out


@pytest.mark.parametrize("cls", CLASSES)
def test_stub_documents_every_field_of_the_table(cls):
    stub = stub_fields(cls)
    for f in _core._settings_fields(cls):
        assert f["name"] in stub, f"{cls}.{f['name']} missing from _core.pyi"
        typ, doc = stub[f["name"]]
        assert typ == f["type"], f"{cls}.{f['name']}: stub says {typ}, the table {f['type']}"
        assert doc == f["doc"], f"{cls}.{f['name']}: stub doc {doc!r}, the table's {f['doc']!r}"


def changed(value, name):
    if name in ("type", "kernel"):
        return "poly"
    if name == "mode":
        return "bounded"
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    return value * 0.5


def test_every_memory_field_round_trips():
    fields = _core._settings_fields("MemorySettings") + _core._settings_fields("_FlatProblem")
    for f in fields:
        s = svattn.MemorySettings(**{f["name"]: changed(f["default"], f["name"])})
        assert getattr(s, f["name"]) == changed(f["default"], f["name"])
        back = pickle.loads(pickle.dumps(s))
        assert back == s and back.to_dict() == s.to_dict()
        assert getattr(svattn.MemorySettings(**{f["name"]: getattr(s, f["name"])}), f["name"]) == getattr(s, f["name"])
        assert s.to_dict() != svattn.MemorySettings().to_dict()
    assert svattn.MemorySettings().to_dict() == {
        "problem": {"kernel": {"type": "rbf", "bandwidth": 1.0, "degree": 2, "coef0": 1.0},
                    "C": 0.1, "ridge": 1e-6},
        "tolerances": {"alpha_tol": 1e-10, "kkt_tol": 1e-15, "max_refine_iterations": 64},
        "mode": "audit", "token_budget": 0, "refactor_period": 256, "max_steps_per_op": 20000,
        "schur_tol": 1e-12}


def test_a_bad_value_names_the_field():
    with pytest.raises(ValueError, match=r"^schur_tol must be in \(0, 1e-2\), got 1"):
        svattn.MemorySettings(schur_tol=1.0).validate()
    with pytest.raises(ValueError, match="refactor_period must be >= 1, got 0"):
        svattn.MemorySettings(refactor_period=0).validate()
    with pytest.raises(ValueError, match="mode"):
        svattn.MemorySettings(mode="eager")
    with pytest.raises(TypeError, match="unexpected keyword argument 'schur'"):
        svattn.MemorySettings(schur=1.0)
