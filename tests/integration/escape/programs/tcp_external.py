import errno, os, socket, sys
s = socket.socket()
s.settimeout(2)
try:
    s.connect((sys.argv[1] if len(sys.argv) > 1 else "1.1.1.1", 80)); print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])
