import errno, os, socket, sys
import time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            with open("/workspace/daemon.log", "a") as f:
                f.write("x")
            time.sleep(0.02)
    os._exit(0)
os.wait()
time.sleep(0.1)
print("parent done")
