#!/usr/bin/env python3
"""The net_tests world's servers, one role per namespace (run under
`ip netns exec`). Prints "ready" on stdout once every socket listens, then
serves until killed.

  servers.py a ADDR CERT KEY   HTTP :80, HTTPS :443, TCP echo :7000
  servers.py b ADDR            HTTP :80
  servers.py v6 ADDR           HTTP :80 (IPv6)
"""
import socket
import socketserver
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BIG = b"x" * (1 << 20)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    role = "?"

    def do_GET(self):
        if self.path == "/big":
            body = BIG
        elif self.path == "/host":
            body = (self.headers.get("Host") or "").encode()
        else:
            body = ("hello from " + self.role + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass


class Http(ThreadingHTTPServer):
    request_queue_size = 512
    daemon_threads = True

    def __init__(self, addr, port, family):
        self.address_family = family
        super().__init__((addr, port), Handler)


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            data = self.request.recv(65536)
            if not data:
                return
            self.request.sendall(data)


class EchoServer(socketserver.ThreadingTCPServer):
    request_queue_size = 512
    daemon_threads = True
    allow_reuse_address = True


def serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main():
    role, addr = sys.argv[1], sys.argv[2]
    Handler.role = role
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    servers = [Http(addr, 80, family)]
    if role == "a":
        tls = Http(addr, 443, family)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[3], sys.argv[4])
        tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
        servers.append(tls)
        servers.append(EchoServer((addr, 7000), Echo))
    for s in servers:
        serve(s)
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
