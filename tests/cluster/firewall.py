"""A step's rules in a kernel (tests/firewall.rs): a node's tables loaded through libnftables as
slurmstepd loads them, servers, and connection attempts, each in the network namespace and as
the uid it is started in. Every wait ends by a deadline.

  firewall.py hold STOP SCRIPT...  load each SCRIPT (nftables' syntax) in one libnftables
                                   context, as slurmstepd does, print HELD, and keep the context
                                   (the tables' owner: `flags owner`) until the file STOP exists
                                   (60 s at most)
  firewall.py serve STOP PORT...   listen on every address, IPv4 and IPv6, on each PORT, print
                                   SERVING, and accept until STOP exists (60 s at most)
  firewall.py connect HOST PORT    print open (connected), refused (reset), or no answer (none
                                   in 1 s)
"""
import ctypes, os, select, socket, sys, time


def wait_for(path, seconds=60):
    end = time.time() + seconds
    while not os.path.exists(path) and time.time() < end:
        time.sleep(0.05)


mode = sys.argv[1]
if mode == "hold":
    nft = ctypes.CDLL("libnftables.so.1")
    nft.nft_ctx_new.restype = ctypes.c_void_p
    nft.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
    nft.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
    nft.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
    nft.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    ctx = nft.nft_ctx_new(0)
    nft.nft_ctx_buffer_error(ctx)
    for script in sys.argv[3:]:
        with open(script, "rb") as f:
            if nft.nft_run_cmd_from_buffer(ctx, f.read()) != 0:
                sys.exit(f"{script}: {nft.nft_ctx_get_error_buffer(ctx).decode()}")
    print("HELD", flush=True)
    wait_for(sys.argv[2])
elif mode == "serve":
    servers = [socket.create_server(("", int(p)), family=socket.AF_INET6, dualstack_ipv6=True,
                                    backlog=16) for p in sys.argv[3:]]
    print("SERVING", flush=True)
    end = time.time() + 60
    while not os.path.exists(sys.argv[2]) and time.time() < end:
        for s in select.select(servers, [], [], 0.05)[0]:
            s.accept()[0].close()
elif mode == "connect":
    try:
        with socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=1):
            print("open")
    except ConnectionRefusedError:
        print("refused")
    except socket.timeout:
        print("no answer")
    except OSError as e:
        print(f"error:{type(e).__name__}")
