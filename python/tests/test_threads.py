"""The GIL is released and readers share the memory: while one thread is inside a long readout,
another thread runs Python code and completes its own readout of the same memory."""
import threading
import time

import numpy as np

import svattn


def big_memory():
    rng = np.random.default_rng(3)
    m = svattn.Memory(svattn.MemorySettings(bandwidth=1.5, C=0.005), 8)
    m.add_batch(np.arange(1500), rng.normal(size=(1500, 8)))
    return m, rng.normal(size=(30000, 8))


def test_two_readouts_in_threads_overlap():
    m, Q = big_memory()
    ref_small = m.readout(Q[:50])
    ticks = [0]
    started = threading.Event()
    result = {}

    def long_readout():
        started.set()
        result["big"] = m.readout(Q)

    a = threading.Thread(target=long_readout)
    a.start()
    started.wait()
    time.sleep(0.05)
    for _ in range(10):  # Python code runs while thread a is in C++ (GIL released) ...
        ticks[0] += 1
    small = m.readout(Q[:50])  # ... and a second readout of the same memory completes meanwhile
    overlapped = a.is_alive()
    a.join()
    assert ticks[0] == 10 and np.array_equal(small, ref_small)
    assert overlapped, "the second readout waited for the first: GIL or lock not released"
    assert np.array_equal(result["big"][:50], ref_small)


def test_mutation_and_readout_threads_are_safe():
    m, Q = big_memory()
    errors = []

    def reader():
        try:
            for _ in range(5):
                r = m.readout(Q[:200])
                assert np.all(np.isfinite(r))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def writer():
        try:
            for i in range(5):
                m.remove(i)
        except Exception as e:  # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=reader), threading.Thread(target=writer)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    m.check_invariants()
    assert len(m) == 1495
