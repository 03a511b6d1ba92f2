"""Builds the svattn wheel from the project's CMake build (docs/python.md "Install").

The extension modules are not compiled by setuptools: CMake builds them (pybind11 `_core`, and the
LibTorch op library `torch/_torch_ops.so` when LibTorch was found) and this file copies them, with
the pure-Python sources, into the wheel.

- ``SVATTN_BUILD_DIR=DIR``: reuse an existing CMake build (``make`` already made one: CI compiles
  nothing twice); the targets ``svattn_python`` must be built there.
- otherwise: configure and build ``build-wheel/`` beside the sources (Release, Ninja when present,
  no tests or benchmarks), then copy from it.

The version is read from the top-level CMakeLists.txt (``project(svattn VERSION x.y.z)``), the one
place it is written; the package's ``svattn/_version.py`` is generated from it.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def project_version() -> str:
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(\s*svattn\s+VERSION\s+([0-9][0-9.]*)", f.read())
    if not m:
        raise SystemExit("setup.py: no `project(svattn VERSION ...)` in CMakeLists.txt")
    return m.group(1)


def cmake_build_dir() -> str:
    """The CMake build to take the extensions from: SVATTN_BUILD_DIR, or a fresh build-wheel/."""
    given = os.environ.get("SVATTN_BUILD_DIR")
    if given:
        path = given if os.path.isabs(given) else os.path.join(ROOT, given)
        if not os.path.isfile(os.path.join(path, "CMakeCache.txt")):
            raise SystemExit(f"setup.py: SVATTN_BUILD_DIR={given}: no CMakeCache.txt there "
                             "(configure and build the project first: make build)")
        return path
    path = os.path.join(ROOT, "build-wheel")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    subprocess.check_call(["cmake", "-S", ROOT, "-B", path, *generator,
                           "-DCMAKE_BUILD_TYPE=Release", "-DSVATTN_BUILD_TESTS=OFF",
                           "-DSVATTN_BUILD_BENCH=OFF", "-DSVATTN_BUILD_APPS=OFF",
                           f"-DPython3_EXECUTABLE={sys.executable}"])
    subprocess.check_call(["cmake", "--build", path, "--target", "svattn_python",
                           "-j", str(os.cpu_count() or 1)])
    return path


def built_package_dir(build_dir: str) -> str:
    pkg = os.path.join(build_dir, "python", "svattn")
    if not glob.glob(os.path.join(pkg, "_core*.so")):
        raise SystemExit(f"setup.py: {pkg} holds no _core extension: build the target "
                         f"svattn_python first (cmake --build {build_dir} --target svattn_python)")
    return pkg


class CopyCMakeExtensions(build_ext):
    """Copies the CMake-built `_core` (and `torch/_torch_ops.so` when present) into the wheel."""

    def run(self) -> None:
        pkg = built_package_dir(cmake_build_dir())
        out = os.path.join(self.build_lib, "svattn")
        os.makedirs(os.path.join(out, "torch"), exist_ok=True)
        for src in glob.glob(os.path.join(pkg, "_core*.so")):
            shutil.copy2(src, out)
        ops = os.path.join(pkg, "torch", "_torch_ops.so")
        if os.path.exists(ops):
            shutil.copy2(ops, os.path.join(out, "torch"))

    def get_outputs(self) -> list:
        out = os.path.join(self.build_lib, "svattn")
        return glob.glob(os.path.join(out, "_core*.so")) + \
            glob.glob(os.path.join(out, "torch", "_torch_ops.so"))


class BuildPyWithVersion(build_py):
    """The pure-Python sources plus a generated svattn/_version.py."""

    def run(self) -> None:
        super().run()
        path = os.path.join(self.build_lib, "svattn", "_version.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(f'"""Generated from CMakeLists.txt by the build."""\n'
                    f'__version__ = "{project_version()}"\n')


def scratch_dir() -> str:
    """setuptools' own build and egg-info folders: inside the CMake build, never in the sources."""
    given = os.environ.get("SVATTN_BUILD_DIR")
    base = (given if os.path.isabs(given) else os.path.join(ROOT, given)) if given else \
        os.path.join(ROOT, "build-wheel")
    path = os.path.join(base, "python-setuptools")
    os.makedirs(path, exist_ok=True)
    return path


setup(
    version=project_version(),
    options={"build": {"build_base": scratch_dir()}, "egg_info": {"egg_base": scratch_dir()}},
    packages=["svattn", "svattn.torch"],
    package_data={"svattn": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("svattn._core", sources=[])],
    cmdclass={"build_ext": CopyCMakeExtensions, "build_py": BuildPyWithVersion},
    zip_safe=False,
)
