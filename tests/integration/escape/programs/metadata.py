# The cloud metadata address: directly (no route out of the sandbox), by
# CONNECT and by an absolute-form GET through the sandbox's HTTP proxy (a
# built-in refusal, whatever the allow list says).
import errno, socket


def name(e):
    return errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__


def proxy_status(request):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(request)
    head = b""
    while b"\r\n" not in head:
        chunk = s.recv(1024)
        if not chunk:
            return "EOF"
        head += chunk
    return head.split(b" ")[1].decode()


try:
    socket.create_connection(("169.254.169.254", 80), timeout=5)
    print("direct OK")
except OSError as e:
    print("direct", name(e))
for label, req in [("connect", b"CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n"),
                   ("get", b"GET http://169.254.169.254/latest/meta-data/ HTTP/1.1\r\n"
                           b"Host: 169.254.169.254\r\n\r\n")]:
    try:
        print(label, proxy_status(req))
    except OSError as e:
        print(label, name(e))
