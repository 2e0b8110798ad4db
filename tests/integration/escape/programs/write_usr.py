import errno, os, socket, sys
try:
    open("/usr/bin/evil", "w"); print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])
