"""The Python torch settings follow the C++ field tables (include/svattn/torch/settings_fields.h,
docs/python.md "Torch settings"): every row is a Python field under its mapped name or listed as
not exposed with the reason, the Python defaults equal the C++ defaults, every numeric field is
refused just outside its C++ range (naming the field) and accepted on a closed end, and the class
docs carry the tables' docs. A default or range changed in C++ alone fails here."""
import copy
import dataclasses
import math
import os
import re

import pytest

pytestmark = pytest.mark.torch
if os.environ.get("SVATTN_REQUIRE_TORCH"):  # the ctest `torch` label: a missing op library fails
    import svattn.torch as st
    from svattn.torch import settings as ss
else:
    pytest.importorskip("torch")
    st = pytest.importorskip("svattn.torch")
    from svattn.torch import settings as ss

CLASSES = {"BatchedSettings": (st.BatchedSettings, ""), "HybridSettings": (st.HybridSettings, "hybrid.")}


def get_path(obj, path):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def set_path(obj, path, value):
    *outer, last = path.split(".")
    for part in outer:
        obj = getattr(obj, part)
    setattr(obj, last, value)


def rows(name):
    return list(ss.table_rows(name))


def row_id(r):
    return f"{r[1]}.{r[2]['name']}"


ALL_ROWS = [(name, r) for name in CLASSES for r in rows(name)]


def test_accessor_returns_the_tables():
    for table in ("batched", "hybrid", "attention", "lm"):
        fields = st.settings_fields(table)
        assert fields and all({"name", "type", "doc", "requirement", "default"} <= set(f) for f in fields)
    names = [f["name"] for f in st.settings_fields("hybrid")]
    assert "chunk" in names and "batched.solve_ridge" in names and "problem.kernel.bandwidth" in names
    with pytest.raises(ValueError, match="no table 'nope'"):
        st.settings_fields("nope")


@pytest.mark.parametrize("name", list(CLASSES) + ["ExactSettings"])
def test_every_field_is_mapped_or_listed(name):
    cls = getattr(st, name)
    py_fields = {f.name for f in dataclasses.fields(cls)}
    mapped = {path.split(".")[0] for path, _, _ in rows(name)}
    only = set(ss._PYTHON_ONLY[name])
    assert only <= py_fields, f"{name}: _PYTHON_ONLY names no field {only - py_fields}"
    assert not (only & mapped), f"{name}: {only & mapped} both mapped and Python-only"
    assert py_fields == mapped | only, f"{name}: fields neither mapped nor listed: {py_fields - mapped - only}"
    for path, table, row in rows(name):
        get_path(cls(), path)  # the mapped name exists
    # Every row of the class's tables is mapped (table_rows) or listed as not exposed with a reason.
    for table, names in ss._TABLES[name]:
        for row in st.settings_fields(table):
            if names is not None and row["name"] not in names:
                continue
            key = (table, row["name"])
            assert key in ss._NOT_EXPOSED or any(t == table and r["name"] == row["name"] for _, t, r in rows(name))
    tables = {t for n in ss._TABLES for t, _ in ss._TABLES[n]}
    for (table, row), why in {**ss._NOT_EXPOSED, **ss._RENAMED}.items():  # reasons, Python names
        assert table in tables and why
        assert row in [f["name"] for f in st.settings_fields(table)], f"stale entry {table}.{row}"


@pytest.mark.parametrize("name,row", ALL_ROWS, ids=[f"{n}-{row_id(r)}" for n, r in ALL_ROWS])
def test_default_equals_the_cpp_default(name, row):
    path, table, spec = row
    value = get_path(CLASSES[name][0](), path)
    assert value == spec["default"], (f"{name}.{path} = {value!r} in Python, the C++ default of "
                                      f"{table}.{spec['name']} is {spec['default']!r}")
    assert isinstance(value, {"int": int, "float": (int, float), "bool": bool, "str": str}[spec["type"]])


def outside(spec):
    """Values just outside the row's C++ range, and nan (inf too for a float that must be finite)."""
    integer = spec["type"] == "int"
    out = []
    if spec["lo"] is not None:
        lo = spec["lo"]
        out.append(lo if spec["lo_open"] else lo - 1)
    if spec["hi"] is not None:
        hi = spec["hi"]
        out.append(hi if spec["hi_open"] else hi + 1)
    if integer:
        return [int(x) for x in out]
    out = [float(x) for x in out] + [math.nan]
    if not spec["custom"]:  # a row with its own check may take inf (rope_base > 1)
        out.append(math.inf)
    return out


def on_the_ends(spec):
    ends = []
    if spec["lo"] is not None and not spec["lo_open"]:
        ends.append(spec["lo"])
    if spec["hi"] is not None and not spec["hi_open"]:
        ends.append(spec["hi"])
    return [int(x) if spec["type"] == "int" else float(x) for x in ends]


NUMERIC = [(n, r) for n, r in ALL_ROWS if r[2]["type"] in ("int", "float")]


@pytest.mark.parametrize("name,row", NUMERIC, ids=[f"{n}-{row_id(r)}" for n, r in NUMERIC])
def test_out_of_range_is_refused_naming_the_field(name, row):
    path, table, spec = row
    cls, prefix = CLASSES[name]
    bad = outside(spec)
    assert bad, f"{table}.{spec['name']}: no value outside its range to try"
    names = "|".join(re.escape(n) for n in {path, spec["name"], path.split(".")[-1]})
    for x in bad:
        with pytest.raises(ValueError, match=rf"^(hybrid\.)?(problem\.)?({names}) must be "):
            s = cls()
            set_path(s, path, x)  # the core's ProblemSettings may refuse here already
            s.validate()
    for x in on_the_ends(spec):  # Python is not stricter than C++
        s = cls()
        set_path(s, path, x)
        s.validate()


TEXT = [(n, r) for n, r in ALL_ROWS if r[2]["type"] == "str" and r[2]["choices"]]


@pytest.mark.parametrize("name,row", TEXT, ids=[f"{n}-{row_id(r)}" for n, r in TEXT])
def test_text_fields_take_the_cpp_choices(name, row):
    path, _, spec = row
    cls, prefix = CLASSES[name]
    for choice in spec["choices"]:
        s = cls()
        set_path(s, path, choice)
        s.validate()
    s = cls()
    set_path(s, path, "no-such-choice")
    with pytest.raises(ValueError, match=rf"^{re.escape(prefix + path)} must be one of "):
        s.validate()


@pytest.mark.parametrize("name", list(CLASSES))
def test_docs_come_from_the_table(name):
    doc = CLASSES[name][0].__doc__
    for path, table, spec in rows(name):
        assert f"{path} ({spec['type']}, {spec['requirement']}; C++ {table}.{spec['name']}): {spec['doc']}" in doc
