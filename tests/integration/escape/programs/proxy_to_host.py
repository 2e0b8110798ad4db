# Through the sandbox's own proxies (HTTP :3128, SOCKS5 :1080) to the host's
# loopback under every spelling, and to the cloud metadata address: each must
# be refused by the proxy (403, SOCKS reply 0x02), never connected.
# argv[1]: a port the host listens on at 127.0.0.1.
import errno, socket, sys

port = int(sys.argv[1])


def name(e):
    return errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__


def connect_status(target):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
    head = b""
    while b"\r\n" not in head:
        chunk = s.recv(1024)
        if not chunk:
            return "EOF"
        head += chunk
    return head.split(b" ")[1].decode()


def socks_reply(addr, port):
    s = socket.create_connection(("127.0.0.1", 1080), timeout=10)
    s.sendall(b"\x05\x01\x00")
    if s.recv(2) != b"\x05\x00":
        return "no greeting"
    s.sendall(b"\x05\x01\x00\x01" + socket.inet_aton(addr) + port.to_bytes(2, "big"))
    rep = s.recv(10)
    return "0x%02x" % rep[1] if len(rep) >= 2 else "EOF"


targets = [("127.0.0.1", "127.0.0.1:%d" % port), ("[::1]", "[::1]:%d" % port),
           ("localhost", "localhost:%d" % port), ("0.0.0.0", "0.0.0.0:%d" % port),
           ("169.254.169.254", "169.254.169.254:80"), ("2130706433", "2130706433:%d" % port)]
for label, target in targets:
    try:
        print(label, connect_status(target))
    except OSError as e:
        print(label, name(e))
try:
    print("socks5", socks_reply("127.0.0.1", port))
except OSError as e:
    print("socks5", name(e))
