import errno, os, socket, sys
for path in (sys.argv[1], "/home", "/root/.bashrc", "/var/log", "/sys/kernel"):
    try:
        os.stat(path); print("OK", path)
    except OSError as e:
        print(errno.errorcode[e.errno])
