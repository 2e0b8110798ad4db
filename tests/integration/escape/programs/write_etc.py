import errno, os, socket, sys
try:
    open("/etc/sudoers", "w").write("sandbox ALL=(ALL) ALL\n"); print("OK")
except OSError as e:
    print(errno.errorcode[e.errno])
