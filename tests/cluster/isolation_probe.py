"""Who can reach a step's TensorFlow ports (tests/isolation.rs). Plain sockets, as TensorFlow's
gRPC servers use them: a listener on every interface, clients that connect over TCP.

  isolation_probe.py serve DIR     a task of the step: listen on the port its TF_CONFIG gives it,
                                   wait for every task, connect to every endpoint of the step and
                                   print STEP|rank|endpoint|result; rank 0 writes the endpoints to
                                   DIR/endpoints; hold the port until DIR/stop exists (120 s at most)
  isolation_probe.py probe DIR WHO  connect to every endpoint in DIR/endpoints and print
                                   WHO|endpoint|result
Results: open (connected), refused (reset), timeout, or error:NAME.
"""
import json, os, socket, sys, time


def attempt(endpoint):
    host, port = endpoint.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return f"error:{type(e).__name__}"


def wait_for(path, seconds):
    end = time.time() + seconds
    while not os.path.exists(path):
        if time.time() > end:
            sys.exit(f"{path} did not appear in {seconds} s")
        time.sleep(0.05)


mode, d = sys.argv[1], sys.argv[2]
if mode == "serve":
    tf = json.loads(os.environ["TF_CONFIG"])
    rank, tasks = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    endpoints = [e for role in sorted(tf["cluster"]) for e in tf["cluster"][role]]
    own = tf["cluster"][tf["task"]["type"]][tf["task"]["index"]]
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", int(own.rsplit(":", 1)[1])))
        s.listen(128)
        open(f"{d}/ready.{rank}", "w").close()
        for r in range(tasks):
            wait_for(f"{d}/ready.{r}", 60)
        for e in endpoints:
            print(f"STEP|{rank}|{e}|{attempt(e)}", flush=True)
        if rank == 0:
            with open(f"{d}/endpoints.tmp", "w") as f:
                f.write("\n".join(endpoints) + "\n")
            os.chmod(f"{d}/endpoints.tmp", 0o644)
            os.rename(f"{d}/endpoints.tmp", f"{d}/endpoints")
        wait_for(f"{d}/stop", 120)
else:
    who = sys.argv[3]
    for e in open(f"{d}/endpoints").read().split():
        print(f"{who}|{e}|{attempt(e)}", flush=True)
