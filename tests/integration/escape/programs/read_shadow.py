import errno, os, socket, sys
try:
    open("/etc/shadow").read(); print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])
