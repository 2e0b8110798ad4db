# sandcastle's Python started ahead (service/ahead.h): a pooled sandbox runs
# `python3 -u -c <this>` before any call wants it, so a one-shot's start-up is
# already paid when its code arrives. Each call still gets a fresh process of
# its own: its own hash seed, its own random state, nothing of another call.
#
# fd 3 is a SOCK_SEQPACKET socket to the exec's supervisor. One message comes:
# the script's path, with the exec's stdin, stdout and stderr as SCM_RIGHTS.
# No message (EOF) means the sandbox went another way: exit quietly.
# What follows mimics `python3 -u PATH`: argv, sys.path[0], __main__'s
# attributes, the traceback (without this loader's frames), the exit status.
def _sandcastle_ahead():
    import os
    import sys
    import _socket

    sock = _socket.socket(fileno=3)
    try:
        data, anc, _flags, _addr = sock.recvmsg(4096, _socket.CMSG_SPACE(3 * 4))
    except OSError:
        os._exit(0)
    fds = []
    for level, kind, payload in anc:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(payload[i:i + 4], sys.byteorder, signed=True)
                    for i in range(0, len(payload) - len(payload) % 4, 4)]
    sock.close()
    if not data:
        os._exit(0)
    if len(fds) != 3:
        # Cut short (a tiny open-files limit): with no stderr to say it on,
        # the exit status says it.
        os._exit(127)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    # The working directory again by its name: a mount made over it since
    # the start (a persistent sandbox's disk on /workspace) is then the one.
    try:
        os.chdir(os.getcwd())
    except OSError:
        pass
    del sys.modules["_socket"]
    # What changed on disk since the start is seen (the import system's
    # caches of directory contents and of missing path entries).
    import importlib
    importlib.invalidate_caches()
    path = os.fsdecode(data)
    sys.argv[:] = [path]
    sys.orig_argv[-2:] = [path]
    sys.path[0] = os.path.dirname(path)
    main = sys.modules["__main__"]
    names = main.__dict__
    for key in [k for k in names if k not in ("__name__", "__doc__", "__package__",
                                              "__spec__", "__builtins__")]:
        del names[key]
    names["__annotations__"] = {}
    names["__file__"] = path
    names["__cached__"] = None
    names["__loader__"] = sys.modules["_frozen_importlib_external"].SourceFileLoader(
        "__main__", path)
    return path, names


def _sandcastle_run(path, names):
    import sys
    try:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
        exec(code, names)
    except SystemExit:
        raise
    except BaseException as e:
        # As the interpreter reports an exception nothing caught, from the
        # script's own frame on (a SyntaxError has none).
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        e.__traceback__ = tb
        sys.excepthook(type(e), e, tb)
        if isinstance(e, KeyboardInterrupt):
            # `python3 PATH` ends by SIGINT then, after its exit handlers.
            import atexit
            import os
            import signal
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1) from None


_sandcastle_run(*_sandcastle_ahead())
