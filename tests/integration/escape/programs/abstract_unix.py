import errno, os, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0" + sys.argv[1]); print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])
