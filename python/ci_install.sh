#!/usr/bin/env bash
# CI's install step for the Python package (run from .ci/run after `make all`): the test dependencies
# from PyPI when missing (torch's PyPI wheel; ~80 s on a fresh machine), then the package itself,
# reusing the static library `make` already built in build/ (only the extension is compiled here).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c 'import torch, numpy, pytest, setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 70)' 2>/dev/null; then
  # setuptools >= 70.1 builds wheels by itself (no `wheel` package needed with --no-build-isolation)
  python3 -m pip install -q --disable-pip-version-check torch numpy pytest "setuptools>=70.1"
fi
BSK_BUILD="${BSK_BUILD:-build}" python3 -m pip install -q --disable-pip-version-check --no-build-isolation .
python3 -c 'import blackwellsparsek as bsk; print("blackwellsparsek", bsk.__version__, "ops:", bsk.available_ops(), "cuda build:", bool(bsk._bsk.WITH_CUDA))'
