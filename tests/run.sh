#!/usr/bin/env bash
# Every test of tfcluster, on a fresh Debian 12 as root:
#   1. installs what is missing (tests/setup.sh);
#   2. lints (rustfmt, clippy) where those tools are installed;
#   3. unit, table, property, ABI and symbol tests (cargo test);
#   4. makes (once per machine) a TensorFlow virtualenv (tests/tensorflow/setup.sh);
#   5. brings up a real 4-node Slurm cluster with the freshly built plugin, runs the end-to-end
#      tests (tests/cluster.rs), the install and packaging tests (tests/install.rs) and the
#      TensorFlow tests (tests/tensorflow.rs) on it, and tears it down whatever happens.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. tests/setup.sh

if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all -- --check; fi
if cargo clippy --version >/dev/null 2>&1; then cargo clippy --all-targets --quiet -- -D warnings; fi

# The plugin itself (cargo test builds only the library the tests link, not the .so).
cargo build
plugin=$PWD/target/debug/libtfcluster.so
cargo test
python=$(bash tests/tensorflow/setup.sh)

trap '"$root/tests/cluster/cluster.sh" down' EXIT
tests/cluster/cluster.sh up "$plugin"
export TFC_PLUGIN=$plugin TFC_PYTHON=$python
cargo test --test cluster -- --include-ignored --test-threads=1
cargo test --test install -- --include-ignored --test-threads=1
cargo test --test tensorflow -- --include-ignored --test-threads=1
