#!/usr/bin/env bash
# A virtualenv with PyTorch for the tests of torch=yes (tests/torch.rs), made once per machine
# and reused. Prints the path of its python. PyPI's wheel for Linux, which runs on CPU with
# gloo (its CUDA libraries come along: about 3 GB to download, 6 GB installed, once). Debian
# 12's Python 3.11, as the TensorFlow ones (tests/tensorflow/setup.sh): the test roots of the
# other Slurm releases bind it in. TFC_TORCH_VENV overrides where it goes.
set -euo pipefail
venv=${TFC_TORCH_VENV:-/var/cache/tfcluster/torch-venv}
version=2.15.0
if ! "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$version')" 2>/dev/null; then
    echo "torch: installing torch==$version into $venv (about 3 GB to download, once)" >&2
    mkdir -p "$(dirname "$venv")"
    [ -x "$venv/bin/pip" ] || /usr/bin/python3.11 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "torch==$version" numpy >&2
fi
ln -sfn /usr/bin/python3.11 "$venv/bin/python3"
chmod -R a+rX "$venv"
echo "$venv/bin/python"
