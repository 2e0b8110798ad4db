# sandcastle's Python kernel driver. Runs inside a sandbox as a long-lived
# process, keeps one set of globals across cells and talks to the server over
# one TCP connection to 127.0.0.1 inside the sandbox's own network namespace.
#
# Framing: 4-byte big-endian length, then one UTF-8 JSON object.
#   server -> driver: execute {id, code, stdin?}, interrupt {id}, shutdown
#   driver -> server: hello {token, pid, version}, stream {id, name, text},
#                     display {id, data{mime: value}}, result {id, ...}
# Standard library only; embedded in the sandcastle binary and written into
# each sandbox read-only.
# Lean on purpose: an idle kernel should cost little more than the bare
# interpreter, so only C modules and what `site` already loaded are imported
# up front (no json/re/socket/threading/ast/traceback); the rest is imported
# when a cell first needs it.
import _ast
import _json
import _signal
import _socket
import _thread
import binascii
import builtins
import io
import os
import select
import sys
import time

_DRIVER_FILE = sys._getframe().f_code.co_filename  # also right when run from the .pyc
_MAX_FRAME = 64 * 1024 * 1024
_FLUSH_INTERVAL = 0.025
_FLUSH_BYTES = 16 * 1024
_PyCF_ONLY_AST = 0x400
_PyCF_ALLOW_TOP_LEVEL_AWAIT = 0x2000
_CO_COROUTINE = 0x80


class _ScanContext:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float
    memo = {}


_scan = _json.make_scanner(_ScanContext())
_encode = _json.make_encoder(None, repr, _json.encode_basestring, None, ":", ",", False, False, True)


def json_dumps(obj):
    return "".join(_encode(obj, 0))


def json_loads(text):
    obj, end = _scan(text, 0)
    return obj


class Channel:
    """The connection to the server. One thread (the kernel's reader) reads;
    any thread may send."""

    def __init__(self, sock):
        self.sock = sock
        self.send_lock = _thread.allocate_lock()
        self.buf = b""

    def send(self, msg):
        data = json_dumps(msg).encode("utf-8", "replace")
        with self.send_lock:
            self.sock.sendall(len(data).to_bytes(4, "big") + data)

    # Every complete frame received so far; None once the server is gone.
    def read_available(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            return None
        self.buf += chunk
        out = []
        while len(self.buf) >= 4:
            n = int.from_bytes(self.buf[:4], "big")
            if n > _MAX_FRAME:
                raise ValueError("frame too large")
            if len(self.buf) < 4 + n:
                break
            frame = self.buf[4:4 + n]
            self.buf = self.buf[4 + n:]
            out.append(json_loads(frame.decode("utf-8", "replace")))
        return out


class CellStream(io.TextIOBase):
    """sys.stdout / sys.stderr while a cell runs: buffered, flushed to the
    server every 25 ms (or 16 KiB) so long runs stream live."""

    def __init__(self, kernel, name):
        self.kernel = kernel
        self.name = name
        self.parts = []
        self.size = 0
        self.last_flush = time.monotonic()
        self.lock = _thread.allocate_lock()

    @property
    def encoding(self):
        return "utf-8"

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if not s:
            return 0
        with self.lock:
            self.parts.append(s)
            self.size += len(s)
            now = time.monotonic()
            # Whole lines go out at once when the last flush is old enough; a
            # partial line waits for the rest or for the watcher's next tick.
            if self.size >= _FLUSH_BYTES or (now - self.last_flush >= _FLUSH_INTERVAL and s[-1] == "\n"):
                self._flush_locked(now)
        return len(s)

    def _flush_locked(self, now):
        self.last_flush = now
        if not self.parts:
            return
        text = "".join(self.parts)
        self.parts = []
        self.size = 0
        cell = self.kernel.cell_id
        if cell is not None:
            self.kernel.chan.send({"type": "stream", "id": cell, "name": self.name, "text": text})

    def flush(self):
        with self.lock:
            self._flush_locked(time.monotonic())

    @property
    def buffer(self):
        return _BinaryView(self)

    def fileno(self):
        return 1 if self.name == "stdout" else 2


class _BinaryView:
    def __init__(self, stream):
        self.stream = stream

    def write(self, b):
        self.stream.write(bytes(b).decode("utf-8", "replace"))
        return len(b)

    def flush(self):
        self.stream.flush()


def _b64encode(data):
    return binascii.b2a_base64(bytes(data), newline=False).decode("ascii")


def _b64(v):
    if isinstance(v, str):
        return v
    return _b64encode(v)


def mime_bundle(obj):
    """Every representation an object offers, Jupyter style; text/plain always."""
    data = {}
    if not isinstance(obj, type):
        fig_png = _figure_png(obj)
        if fig_png is not None:
            data["image/png"] = fig_png
        for meth, mime in (("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"),
                           ("_repr_svg_", "image/svg+xml"), ("_repr_html_", "text/html"),
                           ("_repr_markdown_", "text/markdown"), ("_repr_json_", "application/json"),
                           ("_repr_latex_", "text/latex")):
            if mime in data:
                continue
            f = getattr(obj, meth, None)
            if not callable(f):
                continue
            try:
                v = f()
            except Exception:
                continue
            if isinstance(v, tuple) and v:
                v = v[0]
            if v is None:
                continue
            if mime in ("image/png", "image/jpeg"):
                v = _b64(v)
            elif mime == "application/json":
                try:
                    json_dumps(v)
                except Exception:
                    continue
            elif not isinstance(v, str):
                v = str(v)
            data[mime] = v
    try:
        data["text/plain"] = repr(obj)
    except Exception as e:  # a broken __repr__ must not break the cell
        data["text/plain"] = "<repr failed: %s: %s>" % (type(e).__name__, e)
    return data


def _figure_png(obj):
    mpl = sys.modules.get("matplotlib.figure")
    if mpl is None or not isinstance(obj, mpl.Figure):
        return None
    buf = io.BytesIO()
    obj.savefig(buf, format="png", bbox_inches="tight")
    return _b64encode(buf.getvalue())


class Kernel:
    def __init__(self, chan):
        self.chan = chan
        self.cell_id = None
        self.execution_count = 0
        self.busy = False
        self.in_user = False
        self.main_ident = _thread.get_ident()
        self.sources = {}  # cell file name -> source, for tracebacks
        self.module = type(sys)("__main__")
        self.module.__dict__["__builtins__"] = builtins
        self.ns = self.module.__dict__
        sys.modules["__main__"] = self.module
        self.stdout = CellStream(self, "stdout")
        self.stderr = CellStream(self, "stderr")
        self.pkg_dir = os.environ.get("PYTHONPATH", "").split(os.pathsep)[0]
        self.pkg_mtime = self._pkg_mtime()
        builtins.display = self.display
        # The reader thread hands execute/shutdown messages to the main
        # thread through the inbox; `avail` is released when it grows.
        self.inbox = []
        self.avail = _thread.allocate_lock()
        self.avail.acquire()
        self.delivered = 0  # executes handed over (written by the reader only)
        self.finished = 0  # cells ended (written by the main thread only)

    def _pkg_mtime(self):
        try:
            return os.stat(self.pkg_dir).st_mtime_ns if self.pkg_dir else 0
        except OSError:
            return 0

    # --- display ---------------------------------------------------------
    def display(self, *objs, **kwargs):
        """display(obj, ...): show rich representations (images, HTML,
        Markdown) of each object in the result."""
        raw = kwargs.get("raw", False)
        for obj in objs:
            data = obj if raw and isinstance(obj, dict) else mime_bundle(obj)
            self._send_display(data)

    def _send_display(self, data):
        if self.cell_id is None:
            return
        self.stdout.flush()
        self.stderr.flush()
        self.chan.send({"type": "display", "id": self.cell_id, "data": data})

    def _flush_figures(self):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            nums = plt.get_fignums()
            for n in nums:
                fig = plt.figure(n)
                data = {"image/png": _figure_png(fig), "text/plain": repr(fig)}
                self._send_display(data)
        finally:
            try:
                plt.close("all")
            except Exception:
                pass

    # --- the reader: the only thread that reads the socket. It queues
    # executes for the main thread, turns an interrupt for the running cell
    # into SIGINT there, and flushes a cell's output every 25 ms while one
    # runs. Idle (nothing queued or running), it sleeps in select.
    def _read_loop(self):
        try:
            _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGINT})
            sock = self.chan.sock
            while True:
                timeout = _FLUSH_INTERVAL if self.delivered != self.finished else None
                readable, _, _ = select.select([sock], [], [], timeout)
                if self.busy:
                    now = time.monotonic()
                    for s in (self.stdout, self.stderr):
                        if s.parts and now - s.last_flush >= _FLUSH_INTERVAL and s.lock.acquire(False):
                            try:
                                s._flush_locked(now)
                            finally:
                                s.lock.release()
                if not readable:
                    continue
                msgs = self.chan.read_available()
                if msgs is None:  # the server is gone: nothing left to serve
                    os._exit(0)
                for msg in msgs:
                    kind = msg.get("type")
                    if kind == "interrupt":
                        # Only the cell it names: a late interrupt is dropped.
                        if self.busy and msg.get("id", self.cell_id) == self.cell_id:
                            _signal.pthread_kill(self.main_ident, _signal.SIGINT)
                    elif kind in ("execute", "shutdown"):
                        self.inbox.append(msg)
                        if kind == "execute":
                            self.delivered += 1
                        try:
                            self.avail.release()
                        except RuntimeError:  # already released: the main thread is not waiting
                            pass
        except BaseException as e:  # without a reader the kernel is deaf: end it, loudly
            try:
                sys.__stderr__.write("sandcastle kernel reader failed: %r\n" % (e,))
                sys.__stderr__.flush()
            finally:
                os._exit(70)

    # --- running a cell ----------------------------------------------------
    def run_cell(self, msg):
        cell = msg.get("id")
        code = msg.get("code", "")
        self.execution_count += 1
        n = self.execution_count
        filename = "<cell-%d>" % n
        self.sources[filename] = code
        mtime = self._pkg_mtime()
        if mtime != self.pkg_mtime:
            import importlib
            importlib.invalidate_caches()
            self.pkg_mtime = mtime
        reply = {"type": "result", "id": cell, "execution_count": n, "status": "ok"}
        saved = sys.stdout, sys.stderr, sys.stdin
        sys.stdout, sys.stderr = self.stdout, self.stderr
        sys.stdin = io.StringIO(msg.get("stdin", ""))
        self.stdout.last_flush = self.stderr.last_flush = time.monotonic()
        self.cell_id = cell
        if "matplotlib" in code or "matplotlib" in sys.modules:
            _quiet_matplotlib()
        self.busy = True
        try:
            value = self._guarded(code, filename)
            if value is not None:
                self.ns["_"] = value
                reply["value"] = mime_bundle(value)
        except SystemExit as e:
            code_ = e.code
            if code_ is None:
                reply["exit_code"] = 0
            elif isinstance(code_, int):
                reply["exit_code"] = code_
            else:
                sys.stderr.write(str(code_) + "\n")
                reply["exit_code"] = 1
        except BaseException as e:  # KeyboardInterrupt included: the kernel lives on
            reply["status"] = "error"
            reply["error"] = self._error(e)
            self.stderr.write("".join(reply["error"]["traceback"]))
        finally:
            try:
                self._flush_figures()
            except Exception as e:
                self.stderr.write("sandcastle: could not render a figure: %r\n" % (e,))
            self.busy = False
            self.finished += 1
            try:
                sys.__stdout__.flush()
                sys.__stderr__.flush()
            except Exception:
                pass
            self.stdout.flush()
            self.stderr.flush()
            self.cell_id = None
            sys.stdout, sys.stderr, sys.stdin = saved
            # A later traceback can only point into this cell through
            # something it defined; other sources need not stay (thousands
            # of `x += 1` cells would otherwise grow an idle kernel).
            if "def " not in code and "class " not in code and "lambda" not in code:
                self.sources.pop(filename, None)
        self.chan.send(reply)

    def _guarded(self, code, filename):
        try:
            self.in_user = True
            return self._execute(code, filename)
        finally:
            self.in_user = False

    def _execute(self, code, filename):
        # Like Jupyter: the last statement, if an expression, is the result.
        # The C-level AST (_ast) keeps the `ast` module out of idle kernels.
        flags = _PyCF_ALLOW_TOP_LEVEL_AWAIT
        tree = compile(code, filename, "exec", _PyCF_ONLY_AST | flags)
        last = None
        if tree.body and isinstance(tree.body[-1], _ast.Expr):
            last = _ast.Expression(tree.body.pop().value)
        if tree.body:
            co = compile(tree, filename, "exec", flags)
            r = eval(co, self.ns)
            if r is not None and co.co_flags & _CO_COROUTINE:  # top-level await
                _run_coroutine(r)
        if last is not None:
            co = compile(last, filename, "eval", flags)
            r = eval(co, self.ns)
            if co.co_flags & _CO_COROUTINE:
                r = _run_coroutine(r)
            return r
        return None

    def _error(self, e):
        import linecache
        import traceback
        for name, src in self.sources.items():
            linecache.cache[name] = (len(src), None, src.splitlines(True), name)
        if isinstance(e, SyntaxError):
            tb = traceback.format_exception_only(type(e), e)
        else:
            # Only the user's frames: the driver's own are noise.
            frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename != _DRIVER_FILE]
            tb = []
            if frames:
                tb.append("Traceback (most recent call last):\n")
                tb.extend(traceback.format_list(frames))
            tb.extend(traceback.format_exception_only(type(e), e))
        return {"name": type(e).__name__, "value": str(e), "traceback": tb}

    def on_sigint(self, signum, frame):
        # Only user code is interrupted; a late signal (the cell just ended)
        # must not break the driver's own bookkeeping.
        if self.in_user:
            raise KeyboardInterrupt

    def serve(self):
        _signal.signal(_signal.SIGINT, self.on_sigint)
        _thread.start_new_thread(self._read_loop, ())
        while True:
            while not self.inbox:
                self.avail.acquire()
            msg = self.inbox.pop(0)
            if msg.get("type") == "execute":
                self.run_cell(msg)
            else:  # shutdown
                return


def _run_coroutine(coro):
    import asyncio
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
    return loop.run_until_complete(coro)


def _quiet_matplotlib():
    # plt.show() has nothing to show under Agg: figures come back as images.
    import warnings
    warnings.filterwarnings("ignore", message=".*non-interactive.*")
    warnings.filterwarnings("ignore", message=".*Matplotlib is currently using agg.*")


def main():
    port = int(os.environ.pop("SANDCASTLE_KERNEL_PORT"))
    token = os.environ.pop("SANDCASTLE_KERNEL_TOKEN")
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGINT})
    os.environ.setdefault("MPLBACKEND", "Agg")
    # Like an interactive interpreter: modules in the working directory import.
    sys.path[0] = ""
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    sock.connect(("127.0.0.1", port))
    sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
    chan = Channel(sock)
    chan.send({"type": "hello", "token": token, "pid": os.getpid(),
               "version": sys.version.split()[0]})
    kernel = Kernel(chan)
    del sys.argv[:]
    sys.argv.append("")
    kernel.serve()


if __name__ == "__main__":
    main()
