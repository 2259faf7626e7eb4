import os, signal, sys
path, size = sys.argv[1], int(sys.argv[2]) << 20
block, written = os.urandom(1 << 20), [0]
signal.signal(signal.SIGTERM, lambda *_: (print(written[0]), sys.stdout.flush(), os._exit(0)))
fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
while True:
    os.pwrite(fd, block, written[0] % size)
    os.fsync(fd)
    written[0] += len(block)
