"""Builds and installs the tracetorch Python package with its native extension.

    /usr/bin/python3 -m pip install --no-build-isolation agent/python

The extension (tracetorch._C) is built by the project's CMake (target tracetorch_python_ext) from the
repository root two levels up, against the torch of the interpreter running this script, and so is
the `tracetorch` program (target tracetorch), installed inside the package as tracetorch/_bin/ for
the subcommands that talk to tracetorchd. The `tracetorch` console script (tracetorch.cli:main, as
tracetorch-ml names it) runs the same command line. Tests and benchmarks are not built.
Environment: TRACETORCH_CMAKE_ARGS adds CMake arguments, TRACETORCH_BUILD_JOBS sets the parallelism
(default 2).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]  # agent/python -> repository root.


def _version() -> str:
    """The version of project(tracetorch VERSION ...) in the top-level CMakeLists.txt."""
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(tracetorch\s+VERSION\s+([0-9.]+)", text)
    if not match:
        raise RuntimeError("tracetorch: no project(tracetorch VERSION ...) in CMakeLists.txt")
    return match.group(1)


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        if not (ROOT / "CMakeLists.txt").is_file():
            raise RuntimeError(f"tracetorch: no CMakeLists.txt at {ROOT} (build from a source checkout)")
        build_dir = Path(self.build_temp).resolve() / "cmake"
        build_dir.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DTRACETORCH_BUILD_TESTS=OFF",
            "-DTRACETORCH_BUILD_BENCH=OFF",
            "-DTRACETORCH_BUILD_AGENT=ON",
            f"-DTRACETORCH_PYTHON={sys.executable}",
        ]
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("TRACETORCH_CMAKE_ARGS", ""))
        subprocess.run(configure, check=True)
        jobs = os.environ.get("TRACETORCH_BUILD_JOBS", "2")
        subprocess.run(
            ["cmake", "--build", str(build_dir), "--target", "tracetorch_python_ext", "tracetorch",
             "-j", jobs],
            check=True,
        )
        built = sorted((build_dir / "python" / "tracetorch").glob("_C*.so"))
        if not built:
            raise RuntimeError(f"tracetorch: the build produced no _C extension in {build_dir}")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], target)
        # The daemon subcommands (sessions, snapshot, ...) run this program (tracetorch/cli.py).
        program = build_dir / "cli" / "tracetorch"
        if not program.is_file():
            raise RuntimeError(f"tracetorch: the build produced no tracetorch program in {build_dir}")
        bin_dir = target.parent / "_bin"
        bin_dir.mkdir(exist_ok=True)
        shutil.copy2(program, bin_dir / "tracetorch")


setup(
    name="tracetorch",
    version=_version(),
    description="Forensic trace console for PyTorch models (in-process agent)",
    packages=["tracetorch"],
    package_dir={"": "."},
    ext_modules=[CMakeExtension("tracetorch._C")],
    cmdclass={"build_ext": CMakeBuild},
    entry_points={"console_scripts": ["tracetorch = tracetorch.cli:main"]},
    python_requires=">=3.9",
    zip_safe=False,
)
