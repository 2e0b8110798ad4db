import errno, os, socket, sys
import stat, subprocess
suid = bool(os.stat("/usr/bin/su").st_mode & stat.S_ISUID)
nosuid = bool(os.statvfs("/usr").f_flag & os.ST_NOSUID)
r = subprocess.run(["/usr/bin/su", "-c", "id -u", "root"], stdin=subprocess.DEVNULL, capture_output=True)
print(suid, nosuid, r.returncode != 0, b"\n0\n" not in b"\n" + r.stdout)
