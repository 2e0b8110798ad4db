import errno, os, socket, sys
s = socket.socket()
s.settimeout(2)
try:
    s.connect(("127.0.0.1", int(sys.argv[1]))); print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])
