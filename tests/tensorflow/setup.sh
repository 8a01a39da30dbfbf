#!/usr/bin/env bash
# A virtualenv with TensorFlow (CPU) for the TensorFlow tests, made once per machine and reused.
# Prints the path of its python. Debian 12's Python 3.11 (the host's; also used inside the
# roots of the other Slurm releases). TFC_TF_VENV and TFC_TF_VERSION override the defaults.
set -euo pipefail
venv=${TFC_TF_VENV:-/var/cache/tfcluster/tf-venv}
version=${TFC_TF_VERSION:-2.21.0}
# tf_keras (Keras 2) of the same version: the evaluator test's SidecarEvaluator lives there.
if ! "$venv/bin/python" -c "import tensorflow as tf, tf_keras, sys; sys.exit(tf.__version__ != '$version' or tf_keras.__version__ != '$version')" 2>/dev/null; then
    echo "tensorflow: installing tensorflow-cpu==$version and tf_keras into $venv (about 1.6 GB, once)" >&2
    mkdir -p "$(dirname "$venv")"
    [ -x "$venv/bin/pip" ] || /usr/bin/python3.11 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "tensorflow-cpu==$version" "tf_keras==$version" >&2
fi
# Name the interpreter by its version, not /usr/bin/python3: the test roots of other Slurm
# releases (tests/release/root.sh) bind Debian 12's python3.11 in beside their own python3.
ln -sfn /usr/bin/python3.11 "$venv/bin/python3"
chmod -R a+rX "$venv"
echo "$venv/bin/python"
