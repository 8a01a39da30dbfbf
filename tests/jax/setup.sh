#!/usr/bin/env bash
# A virtualenv with JAX (CPU), Keras 3 and Keras Tuner for the tests of jax=yes, keras=3 and
# tuner=yes (tests/jax.rs), made once per machine and reused. Prints the path of its python.
# Debian 12's Python 3.11, as the TensorFlow ones (tests/tensorflow/setup.sh): the test roots of
# the other Slurm releases bind it in. TFC_JAX_VENV overrides where it goes.
set -euo pipefail
venv=${TFC_JAX_VENV:-/var/cache/tfcluster/jax-venv}
# keras-tuner 1.4.8 imports six without declaring it.
packages=(jax==0.10.2 jaxlib==0.10.2 keras==3.15.1 keras-tuner==1.4.8 six)
if ! KERAS_BACKEND=jax "$venv/bin/python" -c "import jax, keras, keras_tuner, six, sys; sys.exit((jax.__version__, keras.__version__, keras_tuner.__version__) != ('0.10.2', '3.15.1', '1.4.8'))" 2>/dev/null; then
    echo "jax: installing ${packages[*]} into $venv (about 700 MB, once)" >&2
    mkdir -p "$(dirname "$venv")"
    [ -x "$venv/bin/pip" ] || /usr/bin/python3.11 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "${packages[@]}" >&2
fi
ln -sfn /usr/bin/python3.11 "$venv/bin/python3"
chmod -R a+rX "$venv"
echo "$venv/bin/python"
