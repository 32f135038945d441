"""Build of the `blackwellsparsek` Python package (import as `bsk`): a C extension over libbsk.

`pip install .` (or `pip install --no-build-isolation .` where no network is reachable) runs the
repository's Makefile for the static library and links it into the extension, with the CUDA runtime
(static) when the library was built with CUDA. Environment knobs:

  BSK_BUILD      make's build directory to use or reuse (default: build-python)
  BSK_CUDA       1 / 0: build the CUDA backend or the stub (default: as the Makefile decides, i.e. 1
                 when nvcc is on PATH)
  CUDA_HOME      the CUDA toolkit (default: from the nvcc on PATH, as the Makefile does)
  BSK_MAKE_ARGS  extra arguments for make, e.g. GENCODE_PORTABLE="-gencode arch=compute_90a,code=sm_90a"
"""
import os
import re
import shlex
import shutil
import subprocess

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("BSK_BUILD", "build-python")


def _version():
    text = open(os.path.join(ROOT, "include", "bsk.h")).read()
    part = [re.search(r"#define BSK_VERSION_%s (\d+)" % k, text).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(part)


def _cuda_config():
    """(use_cuda, cuda_home) decided as the Makefile does: CUDA_HOME from `command -v nvcc`, CUDA=1 when
    it is found; BSK_CUDA (or CUDA, which make would also read) overrides."""
    home = os.environ.get("CUDA_HOME", "")
    if not home:
        nvcc = shutil.which(os.environ.get("NVCC", "nvcc"))
        if nvcc and nvcc.endswith("/bin/nvcc"):
            home = nvcc[: -len("/bin/nvcc")]
    flag = os.environ.get("BSK_CUDA", os.environ.get("CUDA", ""))
    use = flag == "1" if flag in ("0", "1") else bool(home)
    if use and not home:
        raise RuntimeError("BSK_CUDA=1 but no CUDA toolkit was found (put nvcc on PATH or set CUDA_HOME)")
    return use, home


class BuildWithLibbsk(build_ext):
    """Runs make for build*/lib/libbsk.a before compiling the extension, then links it in."""

    def run(self):
        use_cuda, home = _cuda_config()
        build = os.path.join(ROOT, BUILD)
        lib = os.path.join(build, "lib", "libbsk.a")
        config = "CUDA=%d CUDA_HOME=%s" % (use_cuda, home)
        stamp = os.path.join(build, ".bsk-python-config")
        old = open(stamp).read() if os.path.exists(stamp) else None
        cmd = ["make", "-C", ROOT, "BUILD=" + BUILD, "CUDA=%d" % use_cuda]
        if home:
            cmd.append("CUDA_HOME=" + home)
        if old is not None and old != config:
            cmd.append("-B")  # the objects there were built for the other backend: rebuild them all
        cmd += shlex.split(os.environ.get("BSK_MAKE_ARGS", "")) + [os.path.join(BUILD, "lib", "libbsk.a")]
        print("blackwellsparsek: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        subprocess.check_call(cmd)
        os.makedirs(build, exist_ok=True)
        with open(stamp, "w") as f:
            f.write(config)

        # One small C file: always recompile it, since what it is built against (BSK_WITH_CUDA, the library)
        # may have changed in ways setuptools' timestamps do not see.
        self.force = True
        for ext in self.extensions:
            ext.extra_objects = [lib]
            if use_cuda:
                ext.define_macros.append(("BSK_WITH_CUDA", "1"))
                ext.include_dirs.append(os.path.join(home, "include"))
                ext.library_dirs.append(os.path.join(home, "lib64"))
                # The kernels' C++ host stubs need libstdc++; cudart is static, the driver is loaded at run time.
                ext.libraries += ["cudart_static", "dl", "rt", "stdc++"]
            ext.libraries += ["m", "pthread"]
        super().run()


ext = Extension(
    "blackwellsparsek._bsk",
    sources=["python/blackwellsparsek/_bsk.c"],
    include_dirs=[os.path.join(ROOT, "include"), os.path.join(ROOT, "python", "blackwellsparsek")],
    depends=["python/blackwellsparsek/bsk_dlpack.h", "include/bsk.h"],
    extra_compile_args=["-std=c11", "-Wall", "-Wextra"],
    # libbsk's (and the static CUDA runtime's) symbols stay private to the extension, so they never bind to
    # another copy of the CUDA runtime that the process loaded globally (torch's).
    extra_link_args=["-pthread", "-Wl,--exclude-libs,ALL"],
)

setup(
    version=_version(),
    ext_modules=[ext],
    cmdclass={"build_ext": BuildWithLibbsk},
    # setuptools' own scratch space goes under our build directory, not into build/ (the Makefile's).
    options={"build": {"build_base": os.path.join(BUILD, "setuptools")}},
)
