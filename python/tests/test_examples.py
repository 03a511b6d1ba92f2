"""The examples of examples/python run and do what they claim."""
import os
import re
import subprocess
import sys

import pytest

import svattn

EXAMPLES = os.path.join(os.environ.get("SVATTN_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")),
                        "examples", "python")


def run(name, *args, timeout=600):
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], capture_output=True,
                       text=True, timeout=timeout, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.skipif(not svattn.HAVE_STORE, reason="built without the store")
def test_erase_patient_record():
    out = run("erase_patient_record.py")
    assert "erased 30 tokens of patient 4" in out and "re-solve hash equal: True" in out


def test_certified_eviction():
    out = run("certified_eviction.py")
    assert "readouts bit-identical; verify_state ok: True" in out


def shakespeare():
    for root in (os.environ.get("SVATTN_DATA", ""),
                 os.path.join(EXAMPLES, "..", "..", "..", "shared", "data")):
        p = os.path.join(root, "tinyshakespeare", "input.txt")
        if root and os.path.exists(p):
            return p
    return None


@pytest.mark.torch
def test_char_lm_loss_falls():
    pytest.importorskip("torch")
    data = shakespeare()
    if data is None:
        pytest.skip("tiny-shakespeare not available")
    out = run("char_lm.py", "--data", data, "--steps", "60", "--log-every", "10", "--batch", "4",
              "--seq", "64")
    losses = [float(x) for x in re.findall(r"loss (\d+\.\d+)", out)]
    assert len(losses) >= 5
    assert losses[-1] < losses[0] - 1.0, out  # from ~ln(256) = 5.5 towards < 4


@pytest.mark.torch
def test_certified_model_forgets_a_record():
    pytest.importorskip("torch")
    args = ["--data", shakespeare()] if shakespeare() else ["--data", ""]  # else synthetic records
    out = run("certified_model.py", *args, "--steps", "10")
    assert "certificates ok: True; fully covered: True" in out, out
    diff, influence = map(float, re.search(r"= (\S+) \(the record moved the outputs by (\S+)\)",
                                           out).groups())
    assert diff <= 1e-6 and influence > 1e-6, out
