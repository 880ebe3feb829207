"""Build the engine's CPU kernels (src/subaudit/engine/_kernels.cpp): one shared library per x86-64
instruction set (the engine loads the widest the CPU has; all give the same bits), one
elsewhere.  They are plain C ABI libraries, loaded with ctypes by subaudit.engine.kernels.

The extensions are optional: without a C++ compiler the package installs without them and
the engine uses its torch path and the numpy twin of the kernels' generator (the same random
numbers, slower; subaudit.engine.generator)."""

import platform

from setuptools import Extension, setup

FLAGS = ["-O3", "-std=c++17", "-ffp-contract=off", "-fno-math-errno"]
VARIANTS = {"": []}
if platform.machine().lower() in ("x86_64", "amd64"):
    VARIANTS = {
        "_sse2": [],
        "_avx2": ["-mavx2"],
        "_avx512": ["-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl", "-mprefer-vector-width=512"],
    }

# One after another: the variants compile the same source, so setuptools' build_ext --parallel
# wrote their object files to one path at once and could link a variant from another's
# half-written object (an AVX2 build with no symbols, seen in a clean clone).
setup(ext_modules=[
    Extension(f"subaudit.engine._kernels{suffix}", ["src/subaudit/engine/_kernels.cpp"], language="c++",
              extra_compile_args=FLAGS + flags, depends=["src/subaudit/engine/_ziggurat.h"],
              optional=True)
    for suffix, flags in VARIANTS.items()
])
