"""(c) Certified eviction of a KV memory: readouts before and after evicting the reserve set are
bit-identical, and the evicted memory verifies against its remaining tokens."""
import numpy as np
import svattn

rng = np.random.default_rng(1)
keys = rng.normal(size=(2000, 16))
values = rng.normal(size=(2000, 16))
queries = rng.normal(size=(500, 16))

m = svattn.Memory(svattn.MemorySettings(bandwidth=3.0, C=0.01), dim=16)
m.add_batch(np.arange(len(keys)), keys, values)
before = m.readout(queries)
evicted = m.evict_reserve()
after = m.readout(queries)
assert np.array_equal(before, after), "eviction changed a readout"

ids, k, v = m.tokens()
report = svattn.verify_state(k, m.state(), values=v, ids=ids)
assert report.ok, report.to_dict()
print(f"evicted {len(evicted)} of {len(keys)} tokens ({len(m)} kept); "
      f"{queries.shape[0]} readouts bit-identical; verify_state ok: {report.ok}")
