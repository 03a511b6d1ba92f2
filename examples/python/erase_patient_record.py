"""(a) Erase a patient's record from an audited store and check its certificate (docs/python.md)."""
import sys, tempfile, os
import numpy as np, svattn

rng = np.random.default_rng(0)
path = os.path.join(tempfile.mkdtemp(), "patients.db")
s = svattn.MemorySettings(bandwidth=2.0, C=0.02)
with svattn.Store(path, create=True, certificate_resolve=True) as st:
    st.create_memory("icu", s, dim=8)
    st.import_records("icu", [(pid, rng.normal(size=(30, 8))) for pid in range(10)])
    cert = st.forget_record("icu", 4)                      # patient 4 asks to be forgotten
    assert list(cert.removed_ids) == [svattn.store_token_id(4, p) for p in range(30)]
    assert cert.verify.ok and cert.check.hash_equal, "state must equal a re-solve without patient 4"
    ops = [e.operation for e in st.audit()]
    # ...and its data key and its bounds group's old key are destroyed (one "shred" entry each)
    assert st.verify().ok and ops[-3:] == ["forget", "shred", "shred"]
    assert cert.store.data_key_destroyed and cert.store.bounds_key_destroyed
    print(f"erased {len(cert.removed_ids)} tokens of patient 4; state "
          f"{cert.before.state_sha256[:12]} -> {cert.after.state_sha256[:12]}, optimality "
          f"check ({cert.verify.argument}) ok: {cert.verify.ok}, re-solve hash equal: "
          f"{cert.check.hash_equal}, audit entries: {len(st.audit())}")
sys.exit(0)
