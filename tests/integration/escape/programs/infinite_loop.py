import errno, os, socket, sys
while True:
    pass
