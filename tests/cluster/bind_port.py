"""Run as a task by tests/cluster.rs: listen on the port TF_CONFIG gives this task, hold it
while the other step does the same, and report it. A port already taken fails the bind."""
import json, os, socket, time

tf = json.loads(os.environ["TF_CONFIG"])
role, index = tf["task"]["type"], tf["task"]["index"]
host, port = tf["cluster"][role][index].rsplit(":", 1)
with socket.socket() as s:
    s.bind(("", int(port)))
    s.listen()
    print(f"BOUND|{os.environ['SLURM_STEP_ID']}|{host}|{port}", flush=True)
    time.sleep(3)
