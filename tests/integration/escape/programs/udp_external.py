import errno, os, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b"x", (sys.argv[1] if len(sys.argv) > 1 else "8.8.8.8", 53)); print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])
