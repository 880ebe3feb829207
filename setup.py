"""Build the engine's CPU kernels (src/subaudit/engine/_kernels.cpp): one shared library per x86-64
instruction set (the engine loads the widest the CPU has; all give the same bits), one
elsewhere.  They are plain C ABI libraries, loaded with ctypes by subaudit.engine.kernels.

The extensions are optional: without a C++ compiler the package installs without them and
the engine uses its torch path and the numpy twin of the kernels' generator (the same random
numbers, slower; subaudit.engine.generator)."""

import platform
from pathlib import Path

from setuptools import Extension, setup

FLAGS = ["-O3", "-std=c++17", "-ffp-contract=off", "-fno-math-errno"]
VARIANTS = {"": []}
if platform.machine().lower() in ("x86_64", "amd64"):
    VARIANTS = {
        "_sse2": [],
        "_avx2": ["-mavx2"],
        "_avx512": ["-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl", "-mprefer-vector-width=512"],
    }

# Each variant compiles its own one-line source that includes the kernels, so that each has its
# own object file and build_ext compiles them at once (one source for all three wrote their
# object files to one path at once, and a variant could link another's half-written object: an
# AVX2 build with no symbols, seen in a clean clone). The bits are the source's under each
# variant's flags, as before (the same machine code); three at once took `pip install -e .` from 20 s
# to 9 s on 2 cores.
KERNELS = Path("src/subaudit/engine/_kernels.cpp")


def variant_source(suffix: str) -> str:
    """build/kernels/_kernels{suffix}.cpp, which includes the kernels' source (written when it
    is missing or differs, so an unchanged one keeps its time and nothing recompiles)."""
    path = Path("build") / "kernels" / f"_kernels{suffix}.cpp"
    text = f'#include "../../{KERNELS.as_posix()}"\n'
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)
    return path.as_posix()


setup(
    ext_modules=[
        Extension(f"subaudit.engine._kernels{suffix}", [variant_source(suffix)], language="c++",
                  extra_compile_args=FLAGS + flags, depends=[KERNELS.as_posix(), "src/subaudit/engine/_ziggurat.h"],
                  optional=True)
        for suffix, flags in VARIANTS.items()
    ],
    options={"build_ext": {"parallel": len(VARIANTS)}},
)
