import errno, os, socket, sys
chunks = []
try:
    while True:
        chunks.append(bytearray(16 << 20))  # zero-filled: every page touched
except MemoryError:
    print("MemoryError", len(chunks) * 16 < 1024)
