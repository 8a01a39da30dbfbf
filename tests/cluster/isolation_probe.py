"""Who can reach a step's TensorFlow ports (tests/isolation.rs). Plain sockets, as TensorFlow's
gRPC servers use them: a listener on every address, IPv4 and IPv6, clients that connect over TCP.

  isolation_probe.py serve DIR     a task of the step: listen on the port its TF_CONFIG gives it,
                                   wait for every task, connect to every endpoint of the step and
                                   print STEP|rank|endpoint|result (and NETLINK|rank|count of the
                                   netlink sockets it inherited); rank 0 writes the endpoints to
                                   DIR/endpoints; hold the port until DIR/stop, or
                                   DIR/stop.NODE for the tasks of node NODE, exists (120 s at most)
  isolation_probe.py probe DIR WHO [HOST [SOURCE]]
                                   connect to every endpoint in DIR/endpoints (at HOST instead
                                   of the endpoint's own address, from SOURCE if given) and print
                                   WHO|endpoint|result
  isolation_probe.py listen DIR PORT
                                   another program on a step's port: listen on PORT, write
                                   DIR/endpoints, hold the port until DIR/stop exists
  isolation_probe.py victim DIR [leave]
                                   a task of a 2-task step whose server has not bound its port
                                   yet: rank 0 writes its endpoint to DIR/endpoints (and, with
                                   `leave`, exits); once DIR/squatted exists, rank 1 connects to
                                   it, sends "secret" and prints VICTIM|result
  isolation_probe.py squat DIR     another user's program: listen on the port of DIR/endpoints
                                   first, create DIR/squatted, and print SQUAT|what it received
                                   in 8 s (or nothing)
Results: open (connected), refused (reset), timeout, or error:NAME.
"""
import json, os, socket, sys, time


def attempt(endpoint, at=None, source=None):
    host, port = endpoint.rsplit(":", 1)
    try:
        with socket.create_connection((at or host, int(port)), timeout=3,
                                      source_address=(source, 0) if source else None):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return f"error:{type(e).__name__}"


def netlink_sockets():
    """How many netlink sockets this process started with (slurmstepd's firewall socket must
    not reach a task)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            s = socket.socket(fileno=int(fd))
        except OSError:
            continue
        count += s.family == socket.AF_NETLINK
        s.detach()
    return count


def wait_for(path, seconds, *others):
    end = time.time() + seconds
    while not any(os.path.exists(p) for p in (path,) + others):
        if time.time() > end:
            sys.exit(f"{path} did not appear in {seconds} s")
        time.sleep(0.05)


mode, d = sys.argv[1], sys.argv[2]
if mode == "serve":
    print(f"NETLINK|{os.environ['SLURM_PROCID']}|{netlink_sockets()}", flush=True)
    tf = json.loads(os.environ["TF_CONFIG"])
    rank, tasks = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
    endpoints = [e for role in sorted(tf["cluster"]) for e in tf["cluster"][role]]
    own = tf["cluster"][tf["task"]["type"]][tf["task"]["index"]]
    # Every address, IPv4 and IPv6, as TensorFlow's gRPC server listens ([::], dual stack).
    with socket.create_server(("", int(own.rsplit(":", 1)[1])), family=socket.AF_INET6,
                              dualstack_ipv6=True, backlog=128):
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
        wait_for(f"{d}/stop", 120, f"{d}/stop.{os.environ['SLURMD_NODENAME']}")
elif mode == "victim":
    tf = json.loads(os.environ["TF_CONFIG"])
    own = tf["cluster"][tf["task"]["type"]][tf["task"]["index"]]
    if os.environ["SLURM_PROCID"] == "0":
        with open(f"{d}/endpoints.tmp", "w") as f:
            f.write(own + "\n")
        os.chmod(f"{d}/endpoints.tmp", 0o644)
        os.rename(f"{d}/endpoints.tmp", f"{d}/endpoints")
        if sys.argv[3:] != ["leave"]:
            wait_for(f"{d}/done", 60)
    else:
        wait_for(f"{d}/squatted", 60)
        server = tf["cluster"]["worker"][0]
        host, port = server.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=3) as s:
                s.sendall(b"secret")
                result = "open"
        except socket.timeout:
            result = "timeout"
        except OSError as e:
            result = f"error:{type(e).__name__}"
        print(f"VICTIM|{result}", flush=True)
        open(f"{d}/done", "w").close()
elif mode == "squat":
    port = int(open(f"{d}/endpoints").read().split()[0].rsplit(":", 1)[1])
    with socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True) as s:
        s.settimeout(0.1)
        open(f"{d}/squatted", "w").close()
        # Until a connection comes, or the victim has said what it got (one more look then: its
        # connection, had it made one, is queued by now), 8 s at most.
        received, deadline, last = "nothing", time.time() + 8, False
        while not last and time.time() < deadline:
            last = os.path.exists(f"{d}/done")
            try:
                conn, _ = s.accept()
            except socket.timeout:
                continue
            conn.settimeout(2)
            received = conn.recv(100).decode() or "nothing"
            break
        print(f"SQUAT|{received}", flush=True)
elif mode == "listen":
    with socket.create_server(("", int(sys.argv[3])), family=socket.AF_INET6,
                              dualstack_ipv6=True):
        open(f"{d}/endpoints", "w").close()
        wait_for(f"{d}/stop", 120)
else:
    who, at, source = (sys.argv[3:] + [None, None])[:3]
    for e in open(f"{d}/endpoints").read().split():
        print(f"{who}|{e}|{attempt(e, at, source)}", flush=True)
