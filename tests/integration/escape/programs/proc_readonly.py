import errno, os, sys
# runc's read-only paths: a read-only mount where they exist, so a write
# (open with O_TRUNC) is EROFS.
for path in sys.argv[1:]:
    try:
        ro = os.statvfs(path).f_flag & os.ST_RDONLY
        print(path, "ro" if ro else "rw")
    except OSError as e:
        print(path, errno.errorcode[e.errno])
for path in ("/proc/sys/kernel/hostname", "/proc/sys/net/ipv4/ping_group_range", "/proc/sysrq-trigger"):
    try:
        with open(path, "w") as f:
            f.write("x\n")
        print(path, "OK")
    except OSError as e:
        print(path, errno.errorcode[e.errno])
