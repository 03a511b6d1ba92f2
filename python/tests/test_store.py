"""svattn.Store: records, certificates, suspend/resume, verify, audit, two processes."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import svattn

pytestmark = pytest.mark.skipif(not svattn.HAVE_STORE, reason="built without the store")


def make_store(path, keys, records=8, per=20, **options):
    s = svattn.MemorySettings(bandwidth=2.0, C=0.05)
    st = svattn.Store(str(path), create=True, **options)
    st.create_memory("m", s, dim=keys.shape[1])
    st.import_records("m", [(r, keys[r * per:(r + 1) * per]) for r in range(records)])
    return st, s


def test_forget_is_exact_and_certified(tmp_path, keys200):
    st, s = make_store(tmp_path / "s.db", keys200)
    with st:
        cert = st.forget_record("m", 3)
        assert isinstance(cert, svattn.RemovalCertificate) and cert.verify.ok
        assert list(cert.removed_ids) == [svattn.store_token_id(3, p) for p in range(20)]
        assert cert.store.memory == "m" and cert.store.record == 3 and cert.store.token_rows_erased == 20
        # The store's state equals a memory that never saw record 3.
        ref = svattn.Memory(s, 6)
        for r in (0, 1, 2, 4, 5, 6, 7):
            ref.add_batch([r << 23 | p for p in range(20)], keys200[r * 20:(r + 1) * 20])
        assert st.memory_info("m").state_sha256 == ref.state_sha256 == cert.after.state_sha256
        Q = keys200[160:]
        assert np.array_equal(st.query("m", Q), ref.readout(Q))
        assert np.array_equal(st.decision("m", Q), ref.decision(Q))
        assert st.memory("m").state_sha256 == ref.state_sha256
        v = st.verify()
        assert v.ok and v.chain_ok and v.integrity_ok and v.to_dict()["memories"]
        ops = [e.operation for e in st.audit()]
        # An encrypted store (the default) logs each destroyed key after the forget: the record's
        # data key and the old key of its bounds group (docs/store.md, "Bounds groups").
        assert ops == ["create"] + ["add"] * 8 + ["forget", "shred", "shred"]
        assert st.audit()[-3].to_dict()["operation"] == "forget"
        shreds = [json.loads(e.certificate) for e in st.audit()[-2:]]
        assert sorted(c["key_kind"] for c in shreds) == ["bounds group key", "record data key"]
        assert all(c["record"] == 3 and c["memory"] == "m" for c in shreds)
        assert cert.store.data_key_destroyed and cert.store.bounds_key_destroyed
        assert cert.store.bounds_group == 0
        assert {c["key_id"] for c in shreds} == {cert.store.data_key_id, cert.store.bounds_key_id}


def test_forget_with_resolve(tmp_path, keys200):
    st, _ = make_store(tmp_path / "s.db", keys200, records=4, certificate_resolve=True)
    with st:
        cert = st.forget_record("m", 0)
        assert cert.check.performed and cert.check.hash_equal and cert.check.partition_equal
        assert '"hash_equal":true' in cert.to_json()


def test_suspend_resume(tmp_path, keys200):
    st, _ = make_store(tmp_path / "s.db", keys200, records=4)
    with st:
        h0 = st.memory_info("m").state_sha256
        st.suspend("m", 1)
        assert st.memory_info("m").suspended_records == 1
        assert st.memory_info("m").state_sha256 != h0
        with pytest.raises(ValueError):
            st.suspend("m", 1)
        st.resume("m", 1)
        assert st.memory_info("m").state_sha256 == h0
        assert [r.record for r in st.records("m")] == [0, 1, 2, 3]
        assert st.stored_state("m").state_sha256 == h0


QUERIER = textwrap.dedent("""
    import sys, time, numpy as np, svattn
    path, out = sys.argv[1], sys.argv[2]
    seen = []
    q = np.random.default_rng(1).normal(size=(5, 6))
    with svattn.Store(path, busy_timeout_ms=20000) as st:
        deadline = time.time() + 60
        while time.time() < deadline:
            info = st.memory_info("m")
            r = st.query("m", q)
            assert np.all(np.isfinite(r))
            seen.append(info.state_sha256)
            if info.records == 2:
                break
    open(out, "w").write("\\n".join(seen))
""")


def test_two_processes_forget_and_query(tmp_path, keys200):
    path = tmp_path / "s.db"
    st, _ = make_store(path, keys200, records=8)
    script = tmp_path / "querier.py"
    script.write_text(QUERIER)
    out = tmp_path / "seen.txt"
    proc = subprocess.Popen([sys.executable, str(script), str(path), str(out)], env=os.environ.copy())
    with st:
        for r in range(6):
            st.forget_record("m", r)
        assert proc.wait(timeout=120) == 0
        hashes = {e.state_after for e in st.audit()}
        seen = out.read_text().split("\n")
        assert seen and set(seen) <= hashes  # every observed state is one the audit log records
        assert seen[-1] == st.memory_info("m").state_sha256
        assert st.verify().ok


def test_export_and_receipt_from_python(tmp_path, keys200):
    st, _ = make_store(tmp_path / "s.db", keys200)
    with st:
        st.forget_record("m", 3)
    out = tmp_path / "export"
    e = svattn.export_memory(str(tmp_path / "s.db"), "m", str(out))
    assert e["tokens"] == 140 and e["records"] == 7 and (out / "alpha.npy").exists()
    assert np.load(out / "ids.npy").tolist() == sorted(
        svattn.store_token_id(r, p) for r in range(8) if r != 3 for p in range(20))
    r = svattn.erasure_receipt(str(tmp_path / "s.db"), "m", 3, reason="DPO-17", format="html")
    assert r["ok"] and r["failure"] == "" and "<script" not in r["text"]
    assert "DPO-17" in r["text"] and r["receipt"]["key_store_state"] == "shredded"
    refused = svattn.erasure_receipt(str(tmp_path / "s.db"), "m", 4)
    assert not refused["ok"] and refused["text"] is None
    assert refused["failure"].startswith("forget_entry")
    with pytest.raises(svattn.AlreadyExistsError):
        svattn.export_memory(str(tmp_path / "s.db"), "m", str(out))


def test_master_key_wrapped_store(tmp_path, keys200, monkeypatch):
    # A store whose data keys are wrapped by a master key opens with the key given as an argument,
    # or through the variables the error message names (docs/store.md "Master key").
    monkeypatch.delenv("SVATTN_MASTER_KEY", raising=False)
    monkeypatch.delenv("SVATTN_MASTER_KEY_FILE", raising=False)
    monkeypatch.setenv("I49_KEY", "ab" * 32)
    path = tmp_path / "s.db"
    st, _ = make_store(path, keys200, records=3, master_key_env="I49_KEY")
    with st:
        before = st.memory_info("m").state_sha256
    with pytest.raises(ValueError, match="SVATTN_MASTER_KEY"):
        svattn.Store(str(path))
    key_file = tmp_path / "master.key"
    key_file.write_text("ab" * 32)
    key_file.chmod(0o600)
    with svattn.Store(str(path), master_key_file=str(key_file)) as st:
        assert st.memory_info("m").state_sha256 == before
    monkeypatch.setenv("SVATTN_MASTER_KEY_FILE", str(key_file))
    with svattn.Store(str(path)) as st:
        st.forget_record("m", 1)
        assert st.verify().ok
    monkeypatch.delenv("SVATTN_MASTER_KEY_FILE")
    monkeypatch.setenv("SVATTN_MASTER_KEY", "ab" * 32)
    with svattn.Store(str(path)) as st:
        assert st.memory_info("m").records == 2
    monkeypatch.setenv("SVATTN_MASTER_KEY", "cd" * 32)  # another key: refused, nothing written
    with pytest.raises(ValueError, match="not the key"):
        svattn.Store(str(path))
