"""PyTorch across processes as its guide writes it ("Writing Distributed Applications with
PyTorch", the env:// initialization): torch.distributed.init_process_group() with no
rendezvous arguments, then an all_reduce of each rank's rank + 1 (on CPU, through gloo). Run
as every task of a step, or as every worker of torchrun. Arguments, each optional:
  timeout=SECONDS   how long the ranks wait for each other (torch's default: 30 minutes)
  die=RANK          the task of SLURM_PROCID RANK exits 3 at once instead
  recipe=first-node what sites write by hand instead of torch=yes: MASTER_ADDR the first host
                    of the step's node list, MASTER_PORT 10000 + the job id modulo 20000
  hold=DIR          rank 0 writes its store's address:port to DIR/endpoints once every rank
                    has joined, and the ranks stay until DIR/stop exists (120 s at most)
Prints SUM|<rank>|<world size>|<the sum>|<MASTER_ADDR:MASTER_PORT>|<host>.
"""
import datetime
import os
import socket
import subprocess
import sys
import time

args = dict(a.split("=", 1) for a in sys.argv[1:])
if args.get("die") == os.environ.get("SLURM_PROCID"):
    sys.exit(3)
if args.get("recipe") == "first-node":
    nodes = os.environ["SLURM_STEP_NODELIST"]
    first = subprocess.check_output(["scontrol", "show", "hostnames", nodes], text=True).split()[0]
    os.environ.update(
        MASTER_ADDR=first,
        MASTER_PORT=str(10000 + int(os.environ["SLURM_JOB_ID"]) % 20000),
        RANK=os.environ["SLURM_PROCID"],
        WORLD_SIZE=os.environ["SLURM_NTASKS"],
    )

import torch
import torch.distributed as dist

dist.init_process_group(timeout=datetime.timedelta(seconds=int(args.get("timeout", "120"))))
total = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(total)
master = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
if "hold" in args:
    d = args["hold"]
    if dist.get_rank() == 0:
        with open(f"{d}/endpoints.tmp", "w") as f:
            f.write(master + "\n")
        os.rename(f"{d}/endpoints.tmp", f"{d}/endpoints")
    end = time.time() + 120
    while not os.path.exists(f"{d}/stop") and time.time() < end:
        time.sleep(0.2)
# One write, so that the lines of torchrun's processes, which share the task's stdout, stay whole.
os.write(1, f"SUM|{dist.get_rank()}|{dist.get_world_size()}|{total.item():g}|{master}|{socket.gethostname()}\n".encode())
dist.destroy_process_group()
