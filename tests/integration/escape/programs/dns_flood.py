# 1000 UDP queries for argv[1] to the sandbox's DNS stub, as fast as they go:
# past the per-sandbox rate it must answer REFUSED (EDE "Rate limited"), and
# once the second has passed it must answer again (it did not fall over).
import errno, socket, struct, sys, time

name = sys.argv[1]


def query(qid):
    q = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00"
    # With an EDNS OPT record (UDP size 1232), so a refusal can say why (EDE).
    opt = b"\x00" + struct.pack(">HHIH", 41, 1232, 0, 0)
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 1) + q + struct.pack(">HH", 1, 1) + opt


RCODES = {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("127.0.0.1", 53))
s.settimeout(5)


def ask(qid):
    s.send(query(qid))
    while True:
        r = s.recv(4096)
        if struct.unpack(">H", r[:2])[0] == qid:
            return RCODES.get(r[3] & 0xF, str(r[3] & 0xF))


try:
    print("probe", ask(1))
except OSError as e:
    print("probe", errno.errorcode.get(e.errno, str(e)) if e.errno else "timeout")
    sys.exit(0)
limited = answered = 0
# At most 32 queries in flight: a burst of 1000 would mostly be dropped by
# the stub's socket buffer before its rate limit even saw them.
s.settimeout(2)
try:
    for i in range(1000):
        s.send(query(2 + i))
        if i - answered >= 32:
            r = s.recv(4096)
            answered += 1
            limited += r[3] & 0xF == 5 and b"Rate limited" in r
    while answered < 1000:
        r = s.recv(4096)
        answered += 1
        limited += r[3] & 0xF == 5 and b"Rate limited" in r
except OSError:
    pass
print("answered", answered)
print("rate_limited", limited > 0)
time.sleep(1.1)  # the next second's window
print("after", ask(5000))
