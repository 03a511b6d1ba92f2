"""svattn core module: the docs' snippet, equality with the CLI, exactness, round trips."""
import copy
import pickle

import numpy as np
import pytest

import svattn
from conftest import cli_state_sha256


def test_issue_snippet(tmp_path, cli, keys200, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.savetxt("k.csv", keys200, delimiter=",", fmt="%.17g")
    expected = cli_state_sha256(cli, "--keys", "k.csv", "--exclude", "3,50-52", "--kernel", "rbf",
                                "--bandwidth", "2.5", "--C", "0.03")
    # The snippet of docs/python.md "Core module", as written.
    X = np.loadtxt("k.csv", delimiter=",")
    s = svattn.MemorySettings(kernel="rbf", bandwidth=2.5, C=0.03)
    m = svattn.Memory(s, dim=6, value_dim=6)
    m.add_batch(np.arange(len(X)), X)
    m.remove_batch([3, 50, 51, 52])
    assert m.state_sha256 == expected
    with svattn.Store("s.db", create=True) as st:
        st.create_memory("m", s, dim=6, value_dim=6)
        st.add_record("m", 7, X[:25]); st.add_record("m", 8, X[25:50])
        cert = st.forget_record("m", 7)
        assert sorted(cert.to_dict()["removed_ids"]) == [7 << 23 | p for p in range(25)]


def test_full_set_equals_cli_and_solve(tmp_path, cli, keys200):
    path = tmp_path / "k.csv"
    np.savetxt(path, keys200, delimiter=",", fmt="%.17g")
    expected = cli_state_sha256(cli, "--keys", str(path), "--bandwidth", "2.0", "--C", "0.05")
    s = svattn.MemorySettings(bandwidth=2.0, C=0.05)
    m = svattn.Memory(s, 6)
    m.add_batch(np.arange(200), np.loadtxt(path, delimiter=","))
    assert m.state_sha256 == expected
    assert svattn.solve(keys200, s).state.state_sha256 == expected
    assert svattn.solve(keys200, bandwidth=2.0, C=0.05).state.state_sha256 == expected


def test_add_then_remove_equals_never_seen(keys200):
    s = svattn.MemorySettings(bandwidth=2.0, C=0.05)
    base = svattn.Memory(s, 6)
    base.add_batch(np.arange(150), keys200[:150])
    grown = base.copy()
    for i in range(150, 170):
        grown.add(i, keys200[i])
    grown.remove_batch(list(range(150, 165)))
    for i in range(165, 170):
        grown.remove(i)
    a, b = base.state(), grown.state()
    assert a.state_sha256 == b.state_sha256
    assert np.array_equal(a.alpha, b.alpha) and a.b == b.b
    assert a.partition == b.partition
    Q = keys200[170:]
    assert np.array_equal(base.readout(Q), grown.readout(Q))  # bit for bit


def test_state_partition_alpha(keys200):
    m = svattn.Memory(svattn.MemorySettings(bandwidth=2.0, C=0.05), 6)
    m.add_batch(np.arange(200), keys200)
    st = m.state()
    assert st.ids.dtype == np.int64 and np.array_equal(st.ids, np.arange(200))
    assert st.alpha.shape == (200,) and abs(st.alpha.sum() - 1) < 1e-12
    assert st.status == "optimal" and not st.warmup and st.state_sha256 == m.state_sha256
    p = m.partition
    assert len(p.margin) + len(p.error) + len(p.reserve) == 200
    assert all(m.alpha(i) == 0.05 for i in p.error)
    assert all(m.alpha(i) == 0 for i in p.reserve)
    d = st.to_dict()
    assert d["state_sha256"] == st.state_sha256 and d["settings"]["C"] == 0.05
    assert '"state_sha256"' in st.to_json()
    assert len(m) == 200 and 5 in m and 500 not in m


def test_readout_layouts_and_decision(keys200):
    m = svattn.Memory(svattn.MemorySettings(bandwidth=2.0, C=0.05), 6, value_dim=2)
    m.add_batch(np.arange(200), keys200, keys200[:, :2] * 3)
    Q = np.ascontiguousarray(keys200[:40] + 0.1)
    ref = m.readout(Q)
    assert ref.shape == (40, 2)
    assert np.array_equal(m.readout(np.asfortranarray(Q)), ref)
    assert np.array_equal(m.readout(Q[::1].copy()), ref)
    assert np.array_equal(m.readout(Q[3]), ref[3])
    big = np.zeros((80, 12)); big[::2, ::2] = Q  # strided view, no copy
    assert np.array_equal(m.readout(big[::2, ::2]), ref)
    assert np.allclose(m.readout(Q.astype(np.float32)), m.readout(Q.astype(np.float32).astype(np.float64)), rtol=0, atol=0)
    f = m.decision(Q)
    assert f.shape == (40,) and isinstance(m.decision(Q[0]), float) and f[0] == m.decision(Q[0])
    # One readout row equals the C++ readout of the same row computed alone.
    assert np.array_equal(m.readout(Q[7:8])[0], ref[7])


def test_add_key_layouts_and_byte_order(keys200):
    """add reads a contiguous float64 key in place and converts every other layout, dtype and byte
    order (a big-endian array is byte-swapped, never read as native): all give the same state."""
    s = svattn.MemorySettings(bandwidth=2.0, C=0.05)
    ref, m = svattn.Memory(s, 6), svattn.Memory(s, 6)
    ref.add_batch(np.arange(150), keys200[:150])
    m.add_batch(np.arange(150), keys200[:150].astype(">f8"))
    assert m.state_sha256 == ref.state_sha256
    wide = np.zeros((200, 12)); wide[:, ::2] = keys200  # strided rows
    layouts = [keys200[150], keys200[151].astype(">f8"), wide[152, ::2], list(keys200[153]),
               keys200[154:155], np.asfortranarray(keys200[155:156])]
    for i, key in enumerate(layouts):
        ref.add(150 + i, keys200[150 + i])
        m.add(150 + i, key)
        assert m.state_sha256 == ref.state_sha256, i
    ref.add(160, keys200[160], keys200[161])
    m.add(160, keys200[160].astype(">f8"), wide[161, ::2])
    assert m.state_sha256 == ref.state_sha256
    Q = keys200[:20] + 0.1
    assert np.array_equal(m.readout(Q.astype(">f8")), ref.readout(Q))
    assert np.array_equal(m.readout(Q.astype(">f4")), ref.readout(Q.astype(np.float32)))


def test_evict_reserve_keeps_readouts(keys200):
    m = svattn.Memory(svattn.MemorySettings(bandwidth=2.0, C=0.05), 6)
    m.add_batch(np.arange(200), keys200)
    Q = keys200 + 0.05
    before = m.readout(Q)
    reserve = m.partition.reserve
    evicted = m.evict_reserve()
    assert np.array_equal(evicted, reserve) and len(evicted) > 0
    assert np.array_equal(m.readout(Q), before) and m.evictions == len(evicted)


def test_save_load_pickle_copy(tmp_path, keys200):
    s = svattn.MemorySettings(bandwidth=2.0, C=0.05, mode="audit", refactor_period=64)
    m = svattn.Memory(s, 6)
    m.add_batch(np.arange(100), keys200[:100])
    m.save(str(tmp_path / "m.bin"))
    loaded = svattn.Memory.load(str(tmp_path / "m.bin"))
    assert loaded.state_sha256 == m.state_sha256
    for other in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m), copy.copy(m),
                  svattn.Memory.from_bytes(m.to_bytes())):
        assert other.state_sha256 == m.state_sha256
        assert np.array_equal(other.readout(keys200[100:]), m.readout(keys200[100:]))
    c = m.copy()
    c.remove(0)
    assert c.state_sha256 != m.state_sha256 and 0 in m
    assert pickle.loads(pickle.dumps(s)) == s and s.refactor_period == 64


def test_settings_flat_and_problem():
    s = svattn.MemorySettings(kernel="poly", degree=3, coef0=0.5, C=0.2, ridge=1e-5)
    assert s.problem.kernel == "poly" and s.problem.degree == 3 and s.problem.C == 0.2
    assert s.C == 0.2 and s.ridge == 1e-5 and s.kernel == "poly"
    p = svattn.ProblemSettings(bandwidth=3.0, C=0.01)
    t = svattn.MemorySettings(problem=p, schur_tol=1e-11)
    assert t.bandwidth == 3.0 and t.C == 0.01 and t.schur_tol == 1e-11
    t.problem.C = 0.02  # reference semantics, like the C++ field
    assert t.C == 0.02
    assert t.problem.kernel_settings.type == "rbf"
    d = svattn.MemorySettings().to_dict()
    assert d["problem"]["C"] == 0.1 and d["problem"]["ridge"] == 1e-6 and d["mode"] == "audit"
    svattn.MemorySettings().validate()


def test_verify_state_and_removal_certificate(keys200):
    s = svattn.MemorySettings(bandwidth=2.0, C=0.05)
    m = svattn.Memory(s, 6)
    m.add_batch(np.arange(200), keys200)
    before = m.state()
    rep = svattn.verify_state(keys200, before, resolve=True)
    assert rep.ok and rep.kkt_ok and rep.hash_ok and rep.resolve_hash_equal
    assert rep.to_dict()["ok"] is True and '"hash_ok": true' in rep.to_json()
    bad = svattn.verify_state(keys200 + 1e-3, before)
    assert not bad.ok and not bad.hash_ok
    diag = m.remove_batch([1, 2, 3])
    cert = svattn.removal_certificate(before, m, [3, 1, 2], diagnostics=diag, resolve=True,
                                      probes=keys200[:4])
    assert isinstance(cert, svattn.RemovalCertificate)
    assert list(cert.removed_ids) == [1, 2, 3] and cert.verify.ok and cert.verify.performed
    assert cert.check.performed and cert.check.hash_equal and cert.check.probes == 4
    assert cert.after.state_sha256 == m.state_sha256 and cert.after.n == 197
    assert cert.before.state_sha256 == before.state_sha256
    assert cert.to_dict()["removed_ids"] == [1, 2, 3]
    assert svattn.RemovalCertificate.from_json(cert.to_json()) == cert
    quick = svattn.removal_certificate(before, m, [1, 2, 3], diagnostics=diag)
    assert not quick.check.performed and quick.verify.ok
    with pytest.raises(svattn.FormatError):
        svattn.RemovalCertificate.from_json('{"certificate": "svattn-removal-v1"}')


def test_removal_certificate_refuses_a_removal_that_did_not_happen(keys200):
    s = svattn.MemorySettings(bandwidth=2.0, C=0.05)
    m = svattn.Memory(s, 6)
    m.add_batch(np.arange(200), keys200)
    before = m.state()
    diag = m.remove_batch([3, 4])
    with pytest.raises(ValueError, match="10 is still in the memory"):
        svattn.removal_certificate(before, m, [10], diagnostics=diag)
    with pytest.raises(ValueError, match="given twice"):
        svattn.removal_certificate(before, m, [3, 4, 4], diagnostics=diag)
    other = svattn.Memory(s, 6)
    other.add_batch(np.arange(1000, 1050), keys200[:50])
    with pytest.raises(ValueError, match="was not in `before`"):
        svattn.removal_certificate(other.state(), m, [3, 4], diagnostics=diag)
    assert svattn.removal_certificate(before, m, [4, 3], diagnostics=diag).verify.ok


def test_certificate_from_json_refuses_negative_counts(keys200):
    import json
    m = svattn.Memory(svattn.MemorySettings(bandwidth=2.0, C=0.05), 6)
    m.add_batch(np.arange(200), keys200)
    before = m.state()
    diag = m.remove_batch([7])
    j = json.loads(svattn.removal_certificate(before, m, [7], diagnostics=diag).to_json())
    j["after"]["n"] = -3
    with pytest.raises(svattn.FormatError, match="after.n"):
        svattn.RemovalCertificate.from_json(json.dumps(j))
