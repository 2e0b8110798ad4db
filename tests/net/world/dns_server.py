#!/usr/bin/env python3
"""The net_tests world's DNS responder (UDP and TCP on ADDR:53), with a fixed
zone; every other name is NXDOMAIN. Prints "ready" once both sockets listen.

  dns_server.py ADDR
"""
import socket
import socketserver
import struct
import sys
import threading

ZONE = {
    "allowed.test": "198.51.100.2",
    "x.allowed.test": "198.51.100.2",
    "allowed.test.evil": "198.51.100.3",
    "other.test": "198.51.100.3",
    "loop.test": "127.0.0.1",
    "meta.test": "169.254.169.254",
}


def parse_question(msg):
    """(id, flags, qname, qtype, end of question) or None."""
    if len(msg) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    if qd != 1:
        return None
    i, labels = 12, []
    while True:
        if i >= len(msg):
            return None
        n = msg[i]
        i += 1
        if n == 0:
            break
        if n & 0xC0 or i + n > len(msg):
            return None
        labels.append(msg[i:i + n].decode("ascii", "replace").lower())
        i += n
    if i + 4 > len(msg):
        return None
    qtype, _ = struct.unpack("!HH", msg[i:i + 4])
    return qid, flags, ".".join(labels), qtype, i + 4


def answer(msg):
    q = parse_question(msg)
    if q is None:
        return None
    qid, flags, name, qtype, end = q
    question = msg[12:end]
    rd = flags & 0x0100
    addr = ZONE.get(name)
    if addr is None:
        return struct.pack("!HHHHHH", qid, 0x8000 | 0x0400 | rd | 3, 1, 0, 0, 0) + question
    records = b""
    count = 0
    if qtype == 1:
        records = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(addr)
        count = 1
    return struct.pack("!HHHHHH", qid, 0x8000 | 0x0400 | rd, 1, count, 0, 0) + question + records


class Udp(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        reply = answer(data)
        if reply is not None:
            sock.sendto(reply, self.client_address)


class Tcp(socketserver.BaseRequestHandler):
    def handle(self):
        while True:
            head = self.request.recv(2, socket.MSG_WAITALL)
            if len(head) < 2:
                return
            (n,) = struct.unpack("!H", head)
            data = self.request.recv(n, socket.MSG_WAITALL)
            reply = answer(data)
            if reply is None:
                return
            self.request.sendall(struct.pack("!H", len(reply)) + reply)


class UdpServer(socketserver.ThreadingUDPServer):
    daemon_threads = True


class TcpServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    request_queue_size = 512


def main():
    addr = sys.argv[1]
    for s in (UdpServer((addr, 53), Udp), TcpServer((addr, 53), Tcp)):
        threading.Thread(target=s.serve_forever, daemon=True).start()
    print("ready", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
