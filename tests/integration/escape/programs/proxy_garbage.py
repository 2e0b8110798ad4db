# Binary garbage and a 1 MiB header line to the sandbox's HTTP (:3128) and
# SOCKS5 (:1080) proxies: each connection must be answered with an error or
# closed, and the proxy must serve the next client (CONNECT to argv[1]:80).
import errno, random, socket, sys

allowed = sys.argv[1].encode()
garbage = bytes(random.Random(19).randrange(256) for _ in range(4096))
garbage = b"\x00" + garbage  # never a SOCKS version byte, never a method


def name(e):
    return errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__


def answer(port, data):
    """The HTTP status or SOCKS reply code the proxy sends, or 'closed'."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        got = s.recv(64)
    except OSError as e:
        # A reset, or the write side already gone (ENOTCONN at shutdown).
        if e.errno in (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN):
            return "closed"
        raise
    if not got:
        return "closed"
    if got.startswith(b"HTTP/"):
        return got.split(b" ")[1].decode()
    return "0x%02x" % got[1] if len(got) >= 2 else "short"


def next_client(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    if port == 3128:
        s.sendall(b"CONNECT " + allowed + b":80 HTTP/1.1\r\n\r\n")
        return s.recv(64).split(b" ")[1].decode()
    s.sendall(b"\x05\x01\x00")
    s.recv(2)
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(allowed)]) + allowed + (80).to_bytes(2, "big"))
    return "0x%02x" % s.recv(10)[1]


long_line = b"GET http://" + allowed + b"/ HTTP/1.1\r\nX-Long: " + b"a" * (1 << 20) + b"\r\n\r\n"
for port in (3128, 1080):
    for label, data in (("garbage", garbage + b"\r\n\r\n"), ("long", long_line)):
        for what, f in ((label, lambda: answer(port, data)), ("next", lambda: next_client(port))):
            try:
                print(port, what, f())
            except OSError as e:
                print(port, what, name(e))
