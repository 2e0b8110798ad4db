import errno, os, socket, sys
s = socket.socket()
s.settimeout(2)
try:
    s.connect(("1.1.1.1", 80)); print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])
