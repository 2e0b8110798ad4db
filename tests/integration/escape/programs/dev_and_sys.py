import errno, os, socket, sys
for path in ("/dev/mem", "/dev/sda", "/dev/kmsg", "/sys/fs/cgroup"):
    try:
        open(path, "rb"); print("OK", path)
    except OSError as e:
        print(errno.errorcode[e.errno])
