"""Builds and installs the tracetorch Python package with its native extension.

    python -m pip install --no-build-isolation ./agent/python

The extension (tracetorch._C) is built by the project's CMake (target tracetorch_python_ext) from the
repository root two levels up, against the torch of the interpreter running this script: CMake asks
that interpreter for its torch (cmake/TracetorchTorch.cmake: torch.utils.cmake_prefix_path, the
C++ ABI, CUDA) and never takes another libtorch found on the search path. --no-build-isolation
is required: an isolated build would see a fresh torch from the index, not the one installed.
Where CLI11 is installed, the `tracetorch` program (target tracetorch) is built too and installed
inside the package as tracetorch/_bin/: the `tracetorch` console script (tracetorch.cli:main, as
tracetorch-ml names it) runs it. Without gRPC and protobuf the build is agent-only
(TRACETORCH_AGENT_ONLY): the program then has no daemon subcommands. tracetorch.cli's functions
(inspect_command, ...) run in-process in every build. A torch built with CUDA gets the CUDA path
(TRACETORCH_WITH_CUDA). Tests and benchmarks are not built.

The version carries the torch it was built for as its local label (0.1.0+torch2.11.0.cu130; a wheel's
name says it) and the package requires that torch release (torch==2.11.0).

Environment: TRACETORCH_CMAKE_ARGS adds CMake arguments (after ours: they win),
TRACETORCH_BUILD_JOBS sets the parallelism (default 2), TRACETORCH_BUILD_DIR names the CMake build
folder to configure and build (default: under setuptools' build_temp); an existing one is reused,
so a CI job can install what it has just built without compiling it again.
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


def _torch_local_version() -> tuple:
    """("torch2.11.0.cu130", "2.11.0") for pip's torch 2.11.0+cu130; ("torch1.13.0a0.cpu",
    "1.13.0a0") for Debian's 1.13.0a0: the package's local version label (the wheel's name says
    which torch it was built for) and the torch release it requires (an extension built against one
    torch does not load into another)."""
    try:
        import torch
    except ImportError:
        return None, None  # _torch_flags() stops the build with a clear message.
    release = torch.__version__.split("+")[0]
    cuda = torch.version.cuda
    flavour = "cu" + cuda.replace(".", "") if cuda else "cpu"
    return f"torch{release}.{flavour}", release


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


def _torch_flags() -> list:
    """CMake arguments for the torch of this interpreter; SystemExit with one clear line when that
    torch cannot be built against."""
    try:
        import torch  # noqa: F401 (the interpreter's own torch)
    except ImportError as e:
        raise SystemExit(
            f"tracetorch: {sys.executable} cannot import torch ({e}); install torch first, then "
            "pip install --no-build-isolation ./agent/python") from None
    if not bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)):
        raise SystemExit(
            f"tracetorch: torch {torch.__version__} ({torch.__file__}) was built with the "
            "pre-C++11 ABI (_GLIBCXX_USE_CXX11_ABI=0); the agent links the distribution's abseil "
            "and spdlog (C++11 ABI), which cannot be mixed with it. Use a torch built with the "
            "C++11 ABI (Debian/Ubuntu python3-torch, conda, or a recent pip wheel).")
    flags = [f"-DTRACETORCH_PYTHON={sys.executable}"]
    if torch.version.cuda is not None:
        flags.append("-DTRACETORCH_WITH_CUDA=ON")
    try:
        import pybind11  # A pip-installed pybind11 ships its CMake config inside the package.

        flags.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
    except (ImportError, AttributeError):
        pass  # The distribution's (Debian: pybind11-dev) is found by CMake itself.
    return flags


def _run(cmd: list, what: str) -> None:
    try:
        subprocess.run(cmd, check=True)
    except FileNotFoundError:
        raise SystemExit(f"tracetorch: {cmd[0]} not found: {what} needs CMake (3.22 or later)")
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"tracetorch: {what} failed (exit {e.returncode}); the first error above "
                         "says why") from None


def _cache_bool(build_dir: Path, name: str) -> bool:
    cache = build_dir / "CMakeCache.txt"
    match = (re.search(rf"^{name}:(?:BOOL|INTERNAL)=(\w+)$", cache.read_text(), re.M)
             if cache.is_file() else None)
    return bool(match) and match.group(1).upper() in ("ON", "TRUE", "1", "YES")


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        if not (ROOT / "CMakeLists.txt").is_file():
            raise RuntimeError(f"tracetorch: no CMakeLists.txt at {ROOT} (build from a source checkout)")
        if os.environ.get("TRACETORCH_BUILD_DIR"):
            build_dir = Path(os.environ["TRACETORCH_BUILD_DIR"]).resolve()
        else:
            build_dir = Path(self.build_temp).resolve() / "cmake"
        build_dir.mkdir(parents=True, exist_ok=True)
        configure = [
            "cmake", "-S", str(ROOT), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DTRACETORCH_BUILD_TESTS=OFF",
            "-DTRACETORCH_BUILD_BENCH=OFF",
            "-DTRACETORCH_BUILD_AGENT=ON",
        ]
        configure += _torch_flags()
        if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").is_file():
            configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("TRACETORCH_CMAKE_ARGS", ""))
        _run(configure, "configuring tracetorch")
        has_program = _cache_bool(build_dir, "TRACETORCH_HAS_PROGRAM")
        targets = ["tracetorch_python_ext"] + (["tracetorch"] if has_program else [])
        jobs = os.environ.get("TRACETORCH_BUILD_JOBS", "2")
        _run(["cmake", "--build", str(build_dir), "--target", *targets, "-j", jobs],
             "building tracetorch")
        built = sorted((build_dir / "python" / "tracetorch").glob("_C*.so"))
        if not built:
            raise RuntimeError(f"tracetorch: the build produced no _C extension in {build_dir}")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], target)
        if not has_program:
            return  # No CLI11: tracetorch.cli.main() says that the program is missing.
        # tracetorch.cli.main(), the console script, runs this program (tracetorch/cli.py).
        program = build_dir / "cli" / "tracetorch"
        if not program.is_file():
            raise RuntimeError(f"tracetorch: the build produced no tracetorch program in {build_dir}")
        bin_dir = target.parent / "_bin"
        bin_dir.mkdir(exist_ok=True)
        shutil.copy2(program, bin_dir / "tracetorch")


_LOCAL, _TORCH_RELEASE = _torch_local_version()

setup(
    name="tracetorch",
    version=_version() + (f"+{_LOCAL}" if _LOCAL else ""),
    install_requires=[f"torch=={_TORCH_RELEASE}"] if _TORCH_RELEASE else [],
    description="Forensic trace console for PyTorch models (in-process agent)",
    packages=["tracetorch"],
    package_dir={"": "."},
    ext_modules=[CMakeExtension("tracetorch._C")],
    cmdclass={"build_ext": CMakeBuild},
    entry_points={"console_scripts": ["tracetorch = tracetorch.cli:main"]},
    python_requires=">=3.9",
    zip_safe=False,
)
