# Opens argv[2] connections to the sandbox's HTTP proxy, each an idle tunnel
# (CONNECT argv[1]:80), one after the other, keeping the tunnels and closing
# the refused ones. Prints how many got each answer, sorted ("200 64", "503
# 236"; "hung" when no answer came within 10 s). With argv[3] it then holds
# the tunnels until that file exists (at most 60 s), for a neighbour to try
# its own proxy meanwhile.
import collections, errno, os, socket, sys, time

host, count = sys.argv[1].encode(), int(sys.argv[2])
hold = sys.argv[3] if len(sys.argv) > 3 else None
seen, kept = collections.Counter(), []
for _ in range(count):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
        s.sendall(b"CONNECT " + host + b":80 HTTP/1.1\r\n\r\n")
        head = s.recv(64)
        code = head.split(b" ")[1].decode() if head.startswith(b"HTTP/") else "closed"
    except socket.timeout:
        code = "hung"
    except OSError as e:
        code = errno.errorcode.get(e.errno, str(e))
        s = None
    seen[code] += 1
    if code == "200":
        kept.append(s)
    elif s is not None:
        s.close()
for code in sorted(seen):
    print(code, seen[code])
sys.stdout.flush()
if hold:
    deadline = time.monotonic() + 60
    while not os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.05)
