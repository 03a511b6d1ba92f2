"""Shared fixtures of the svattn pytest suite (run by ctest: python.core -m "not torch",
python.torch -m torch; see python/CMakeLists.txt)."""
import os
import shutil
import subprocess
import json

import numpy as np
import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "torch: needs svattn.torch (LibTorch op library)")
    venv = os.environ.get("SVATTN_EXPECT_INSTALLED")
    if venv:
        # ctest runs the suite against the wheel installed in this venv, never the build tree.
        import svattn
        where = os.path.realpath(svattn.__file__)
        if not where.startswith(os.path.realpath(venv) + os.sep):
            raise pytest.UsageError(f"svattn imported from {where}, not from the venv {venv}")


@pytest.fixture
def cli():
    """Path of the built `svattn` CLI (SVATTN_CLI, set by ctest)."""
    path = os.environ.get("SVATTN_CLI") or shutil.which("svattn")
    if not path:
        pytest.skip("svattn CLI not built")
    return path


def cli_state_sha256(cli_path, *args):
    out = subprocess.run([cli_path, "solve", *args, "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["state_sha256"]


@pytest.fixture
def keys200():
    """200 x 6 keys of a fixed seed (three clusters, so partitions are non-trivial)."""
    rng = np.random.default_rng(17)
    centres = rng.normal(scale=3.0, size=(3, 6))
    return centres[rng.integers(0, 3, size=200)] + rng.normal(size=(200, 6))
