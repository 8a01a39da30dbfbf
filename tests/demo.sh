#!/usr/bin/env bash
# The demo: install what is missing, build the plugin, start a local 4-node Slurm cluster that
# loads it, run one distributed step and show what each task received, show a parameter-server
# step ending when its chief exits, then tear it all down.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. tests/setup.sh
cargo build --release --quiet
plugin=$PWD/target/release/libtfcluster.so

# The line the packages install (the Makefile's snippet): optional, isolate=yes.
export TFC_NODES="node1 node2 node3 node4" TFC_CPU_NODES="" TFC_PLUGSTACK_KIND=optional
trap '"$root/tests/cluster/cluster.sh" down' EXIT
tests/cluster/cluster.sh up "$plugin" isolate=yes

show='import json, os
tf = json.loads(os.environ["TF_CONFIG"])
t = tf["task"]
print("rank %s on %-6s %-9s listens on %-12s CUDA_VISIBLE_DEVICES=%s" % (
    os.environ["SLURM_PROCID"], os.uname().nodename, "%s:%d" % (t["type"], t["index"]),
    tf["cluster"][t["type"]][t["index"]], os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")))
if os.environ["SLURM_PROCID"] == "0":
    print("TF_CONFIG of rank 0:", json.dumps(tf))'

cmd="srun -N2 -n4 --gres=gpu:4 --tf-cluster=chief:1,worker:3 python3 -c '<print role, address, GPUs>'"
echo
echo "plugstack.conf: $(cat "${TFC_DIR:-/tmp/tfcluster-cluster}/etc/plugstack.conf")"
echo "\$ $cmd"
cd /tmp
out=$(srun -N2 -n4 --gres=gpu:4 --tf-cluster=chief:1,worker:3 /usr/bin/python3 -c "$show")
grep '^rank' <<<"$out" | sort -n -k2
grep '^TF_CONFIG' <<<"$out"
echo
echo "\$ srun -N2 -n4 --tf-cluster='chief:1,ps:1,worker:*' python3 -c '<the chief trains 1 s; ps and workers serve forever>'"
serve='import json, os, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
time.sleep(1 if task["type"] == "chief" else 600)'
start=$(date +%s%N)
set +e
srun -N2 -n4 --tf-cluster='chief:1,ps:1,worker:*' /usr/bin/python3 -c "$serve" 2>&1 | grep '^tfcluster:'
rc=${PIPESTATUS[0]}
set -e
ms=$((($(date +%s%N) - start) / 1000000))
printf '(srun exited with %s after %d.%d s' "$rc" $((ms / 1000)) $((ms % 1000 / 100))
[ "$rc" = 137 ] && printf '; Slurm 22.05 reports the stopped tasks as killed, from 23.11 srun exits with the chief'"'"'s status'
echo ")"
echo
echo "\$ srun -N2 -n4 --tf-cluster=ps:1,worker:5 true    # a spec that does not fit the step"
srun -N2 -n4 --tf-cluster=ps:1,worker:5 true \
    || echo "(srun exited with $?: every task exited 1 before its program started; with \`required\`, srun stops before launch)"
echo
