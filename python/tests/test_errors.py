"""Every bad input raises the mapped Python exception with the C++ message; none crashes."""
import numpy as np
import pytest

import svattn


@pytest.fixture
def mem():
    m = svattn.Memory(svattn.MemorySettings(bandwidth=2.0, C=0.2), 3)
    m.add_batch([0, 1, 2, 3, 4, 5], np.random.default_rng(0).normal(size=(6, 3)))
    return m


def test_settings_validation_names_the_field():
    with pytest.raises(ValueError, match=r"^C must be finite and > 0, got -1"):
        svattn.MemorySettings(C=-1.0).validate()
    with pytest.raises(ValueError, match="bandwidth"):
        svattn.MemorySettings(bandwidth=0.0).validate()
    with pytest.raises(ValueError, match="ridge"):
        svattn.MemorySettings(ridge=float("nan")).validate()
    with pytest.raises(ValueError, match="schur_tol"):
        svattn.MemorySettings(schur_tol=1.0).validate()
    with pytest.raises(ValueError, match="tolerances.alpha_tol"):
        svattn.MemorySettings(tolerances=svattn.Tolerances(alpha_tol=1.0)).validate()
    with pytest.raises(ValueError, match="C must be"):
        svattn.Memory(svattn.MemorySettings(C=-1.0), 3)


def test_unknown_kernel_and_mode():
    with pytest.raises(ValueError, match="gauss"):
        svattn.MemorySettings(kernel="gauss")
    with pytest.raises(ValueError, match="mode: unknown mode 'lazy'"):
        svattn.MemorySettings(mode="lazy")


def test_nan_keys_and_queries(mem):
    bad = np.ones((2, 3)); bad[1, 2] = np.nan
    with pytest.raises(svattn.FormatError, match="non-finite") as e:
        mem.add_batch([10, 11], bad)
    assert isinstance(e.value, ValueError)
    with pytest.raises(ValueError):
        mem.add(12, [1.0, np.inf, 0.0])
    with pytest.raises(ValueError, match="queries: row 1 column 2 is not finite"):
        mem.readout(bad)
    assert len(mem) == 6  # nothing changed


def test_wrong_shape(mem):
    with pytest.raises(ValueError, match="3"):
        mem.add_batch([10, 11], np.ones((2, 4)))
    with pytest.raises(ValueError, match="queries: expected 3 columns, got 2"):
        mem.readout(np.ones((4, 2)))
    with pytest.raises(ValueError, match="keys: expected a 2-D array"):
        mem.add_batch([10], np.ones(3))
    with pytest.raises(ValueError, match="queries: expected a 1-D or 2-D array"):
        mem.readout(np.ones((2, 2, 3)))
    with pytest.raises(ValueError):
        mem.add_batch([10, 11, 12], np.ones((2, 3)))


def test_wrong_dtype(mem):
    with pytest.raises(TypeError, match="complex128"):
        mem.readout(np.ones((2, 3), dtype=complex))
    with pytest.raises(TypeError, match="keys"):
        mem.add_batch([10], np.array([["a", "b", "c"]]))
    with pytest.raises(TypeError, match="ids must be integers"):
        mem.remove_batch([1.5])


def test_not_found_and_already_exists(mem):
    with pytest.raises(KeyError):
        mem.remove(99)
    with pytest.raises(KeyError):
        mem.remove_batch([0, 99])
    with pytest.raises(svattn.AlreadyExistsError) as e:
        mem.add(0, [0.0, 0.0, 0.0])
    assert isinstance(e.value, KeyError)
    assert len(mem) == 6


@pytest.mark.parametrize("ids", [np.array([7, 2**64 - 1], dtype=np.uint64), [7, 2**64 - 1],
                                 [7, 2**64], [7, 2**63]])
def test_ids_outside_int64_are_refused_not_wrapped(mem, ids):
    # Token ids are int64: a uint64 above 2^63 - 1 must not be stored as a negative id.
    keys = np.ones((2, 3))
    before = mem.state_sha256
    with pytest.raises(OverflowError, match=f"ids: id {int(ids[1])} is outside the int64 range"):
        mem.add_batch(ids, keys)
    with pytest.raises(OverflowError, match="outside the int64 range"):
        mem.remove_batch(ids)
    assert mem.state_sha256 == before and -1 not in mem and len(mem) == 6


@pytest.mark.parametrize("id_", [np.uint64(2**64 - 1), 2**64 - 1, 2**63, -2**63 - 1])
def test_one_id_outside_int64_is_refused(mem, id_):
    with pytest.raises(OverflowError, match=f"id: id {int(id_)} is outside the int64 range"):
        mem.add(id_, np.ones(3))
    for f in (mem.remove, mem.alpha, mem.__contains__):
        with pytest.raises(OverflowError, match="outside the int64 range"):
            f(id_)
    assert -1 not in mem and len(mem) == 6


def test_ids_at_the_int64_limits_are_tokens(mem):
    top, bottom = np.uint64(2**63 - 1), -2**63
    mem.add(top, np.full(3, 0.5))
    mem.add_batch(np.array([bottom], dtype=np.int64), np.full((1, 3), -0.5))
    assert 2**63 - 1 in mem and bottom in mem and mem.alpha(np.int64(bottom)) >= 0
    with pytest.raises(TypeError, match="id: expected an integer id, got float"):
        mem.add(3.0, np.ones(3))


def test_files(tmp_path):
    with pytest.raises(OSError):
        svattn.Memory.load(str(tmp_path / "missing.bin"))
    (tmp_path / "junk.bin").write_bytes(b"not a memory")
    with pytest.raises(svattn.FormatError):
        svattn.Memory.load(str(tmp_path / "junk.bin"))
    with pytest.raises(svattn.FormatError):
        svattn.Memory.from_bytes(b"\x00" * 64)


@pytest.mark.skipif(not svattn.HAVE_STORE, reason="built without the store")
def test_missing_store(tmp_path):
    with pytest.raises(OSError):
        svattn.Store(str(tmp_path / "missing.db"))
    (tmp_path / "bad.db").write_bytes(b"garbage" * 100)
    with pytest.raises(svattn.FormatError):
        svattn.Store(str(tmp_path / "bad.db"))
    with svattn.Store(str(tmp_path / "s.db"), create=True) as st:
        with pytest.raises(KeyError):
            st.forget_record("nope", 1)
        st.create_memory("m", svattn.MemorySettings(), 2)
        with pytest.raises(svattn.AlreadyExistsError):
            st.create_memory("m", svattn.MemorySettings(), 2)
        with pytest.raises(svattn.FormatError):
            st.add_record("m", 1, np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match="closed"):
        st.memory_names()
