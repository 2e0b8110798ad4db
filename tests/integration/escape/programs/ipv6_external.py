# A TCP connection to an IPv6 address outside: the sandbox has no IPv6
# route in any mode but full with IPv6. argv[1]: the address.
import errno, socket, sys

try:
    socket.create_connection((sys.argv[1], 80), timeout=5)
    print("OK")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e)) if e.errno else type(e).__name__)
