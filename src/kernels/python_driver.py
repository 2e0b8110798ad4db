# sandcastle's Python kernel driver (part 2 of 2: the build puts
# python_cells.py, the cell compiler, before it in the same file). Runs inside a sandbox as a long-lived
# process, keeps one set of globals across cells and talks to the server over
# fd 3, one end of a connected unix socketpair that is open when it starts
# (made close-on-exec at once: processes a cell starts never inherit it).
#
# Framing: 4-byte big-endian length, then one UTF-8 JSON object.
#   server -> driver: execute {id, code, stdin?, limits, list?}, interrupt {id},
#                     shutdown
#   driver -> server: hello {pid, version} (first), stream {id, name, text},
#                     display {id, data{mime: value}}, result {id, ...,
#                     listing?} (the workdir after the cell, when asked)
# The server checks every frame and ends the kernel on one it cannot take
# (too large, too deep, a field of the wrong type): output is cut to fit the
# limits the execute message names (_LIMITS) before it is sent.
# Standard library only; embedded in the sandcastle binary and published once
# per server, precompiled, to /opt/sandcastle (read-only in every sandbox).
# Lean on purpose: an idle kernel should cost little more than the bare
# interpreter, so only C modules and what `site` already loaded are imported
# up front (no json/re/socket/threading/ast/traceback), the rest when a cell
# first needs it; cells are compiled without builtin compile(), which would
# build the AST types (see compile_cell); and an idle kernel runs no second
# thread, a busy one only an output flusher (see Kernel.serve). Fast on
# purpose: the main thread reads the channel itself (SIGIO while a cell runs),
# so an execute reaches its cell without a hand-off between threads, and a
# short cell run again reuses its compiled code.
import _imp
import _json
import _signal
import _thread
import binascii
import builtins
import fcntl
import io
import os
import select
import sys
import time

_DRIVER_FILE = sys._getframe().f_code.co_filename  # also right when run from the .pyc
_CHANNEL_FD = 3
_MAX_FRAME = 64 * 1024 * 1024
_FLUSH_INTERVAL = 0.025
_FLUSH_BYTES = 16 * 1024
_STREAM_CHUNK = 65536  # characters per stream frame (at most 6 bytes each once escaped)
_LIMITS = {"frame": 12 << 20, "display": 8 << 20, "text": 1 << 20, "depth": 128, "values": 65536}
_READER_IDLE = 5.0  # seconds an idle kernel keeps its flusher thread
_F_SETOWN_EX = 15  # fcntl.h, Linux
_F_OWNER_TID = 0


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


def _frame_bytes(msg):
    return json_dumps(msg).encode("utf-8", "replace")


def _fits(obj, depth, values):
    """False when obj as JSON nests deeper than `depth` or holds more than
    `values` array elements and object members (the server's count)."""
    stack = [(obj, 1)]
    n = 0
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict):
            items = o.values()
        elif isinstance(o, (list, tuple)):
            items = o
        else:
            continue
        n += max(len(o), 1)
        if d > depth or n > values:
            return False
        stack.extend((v, d + 1) for v in items)
    return True


_LIST_DEPTH = 64  # the file worker's kMaxListDepth
_MAX_PATH = 4096
_O_LIST = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def _list_workspace(spec):
    """The regular files below spec["dir"], as the file worker lists them
    (symlinks never followed, a subdirectory opened O_NOFOLLOW, spec["skip"]
    left out at the top, at most spec["max"] entries of any type, then
    truncated): {"files": [[path, size, mtime_sec, mtime_nsec]], "truncated"}.
    None when the server must list it itself: the directory cannot be read,
    a name is not UTF-8, or the listing is over spec["bytes"]."""
    root, skip = spec.get("dir"), spec.get("skip", "")
    most, budget = spec.get("max"), spec.get("bytes")
    if not isinstance(root, str) or type(most) is not int or type(budget) is not int:
        return None
    files, n, size, truncated = [], 0, 0, False
    stack = [("", 0)]
    while stack and not truncated:
        rel, depth = stack.pop()
        try:
            fd = os.open(root + "/" + rel if rel else root, _O_LIST | (os.O_NOFOLLOW if rel else 0))
        except OSError:
            if not rel:
                return None
            continue  # gone or unreadable meanwhile: list what is there
        try:
            with os.scandir(fd) as it:
                for e in it:
                    name = e.name
                    if not rel and name == skip:
                        continue
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if n >= most:
                        truncated = True
                        break
                    n += 1
                    path = rel + "/" + name if rel else name
                    mode = st.st_mode & 0o170000
                    if mode == 0o040000:
                        if depth + 1 < _LIST_DEPTH and len(path) < _MAX_PATH - 256:
                            stack.append((path, depth + 1))
                    elif mode == 0o100000:
                        size += len(path) + 48
                        if size > budget:
                            return None
                        sec, nsec = divmod(st.st_mtime_ns, 1000000000)
                        files.append([path, st.st_size, sec, nsec])
        except OSError:
            if not rel:
                return None
        finally:
            os.close(fd)
    for f in files:
        try:
            f[0].encode("utf-8")
        except UnicodeEncodeError:  # surrogate-escaped bytes: the file worker sends those
            return None
    return {"files": files, "truncated": truncated}


def _surely_fits(body, depth, values):
    """True when the encoded frame cannot nest deeper than `depth` or hold
    more than `values` values: it has too few brackets and commas (counted in
    strings too, so never too many). Spares _fits' walk for small frames."""
    opens = body.count(b"[") + body.count(b"{")
    return opens <= depth and opens + body.count(b",") < values


def _cut(s, n):
    if len(s) <= n:
        return s
    half = n // 2
    return "%s\n... [%d characters omitted] ...\n%s" % (s[:half], len(s) - 2 * half, s[len(s) - half:])


class Channel:
    """The connection to the server: our end of a socketpair, at fd 3. One
    thread at a time reads it (see Kernel.serve); any thread may send."""

    def __init__(self, fd):
        self.fd = fd
        self.send_lock = _thread.allocate_lock()
        self.buf = bytearray()  # received, not yet parsed (the reader's)
        self.main = _thread.get_ident()
        self.writer = None  # the thread in the middle of writing a frame
        self.deferred = False  # a SIGINT held back (Kernel.on_sigint)

    def send(self, msg):
        self.send_data(_frame_bytes(msg))

    def send_data(self, data):
        data = len(data).to_bytes(4, "big") + data
        with self.send_lock:
            self.writer = _thread.get_ident()
            try:
                n = os.write(self.fd, data)
                if n < len(data):
                    view = memoryview(data)[n:]
                    while view:
                        view = view[os.write(self.fd, view):]
            finally:
                self.writer = None
        if self.deferred and _thread.get_ident() == self.main:  # see on_sigint
            self.deferred = False
            raise KeyboardInterrupt

    # The next complete frame already received, or None.
    def next_frame(self):
        buf = self.buf
        if len(buf) < 4:
            return None
        n = int.from_bytes(buf[:4], "big")
        if n > _MAX_FRAME:
            raise ValueError("frame too large")
        if len(buf) < 4 + n:
            return None
        text = buf[4:4 + n].decode("utf-8", "replace")
        del buf[:4 + n]
        return json_loads(text)

    # Reads what the server sent (blocking); False once it is gone.
    def fill(self):
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            return False
        self.buf += chunk
        return True


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
            send = self.kernel.chan.send
            for i in range(0, len(text), _STREAM_CHUNK):
                send({"type": "stream", "id": cell, "name": self.name, "text": text[i:i + _STREAM_CHUNK]})

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
                if not _fits(v, _LIMITS["depth"] - 4, _LIMITS["values"] - 64):
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
        # The main thread reads the channel, always: between cells by
        # blocking in read(), during one from the SIGIO handler (see serve).
        # A flusher thread sends a running cell's output every 25 ms; it
        # ends once no cell has run for `reader_idle` seconds.
        self.lock = _thread.allocate_lock()  # guards flusher/started
        self.pending = []  # frames the SIGIO handler read that are not interrupts
        self.started = 0  # cells started (under lock)
        self.flusher = False  # a flusher thread runs (under lock)
        self.stop_id = None  # the cell the last interrupt named
        self.in_sigio = False  # on_sigio is reading the channel
        ms = os.environ.pop("SANDCASTLE_KERNEL_READER_IDLE_MS", "")
        self.reader_idle = int(ms) / 1000.0 if ms.isdigit() else _READER_IDLE
        self.limits = dict(_LIMITS)

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
        cell = self.cell_id
        if cell is None:
            return
        self.stdout.flush()
        self.stderr.flush()
        lim = self.limits
        if not isinstance(data, dict) or not _fits(data, lim["depth"] - 2, lim["values"] - 64):
            data = {"text/plain": "<display omitted: nested deeper than %d levels or more than %d values>"
                    % (lim["depth"] - 2, lim["values"] - 64)}
        body = _frame_bytes({"type": "display", "id": cell, "data": data})
        if len(body) > lim["display"]:
            body = _frame_bytes({"type": "display", "id": cell, "data": {
                "text/plain": "<display omitted: %d bytes, over the %d-byte limit>" % (len(body), lim["display"])}})
        self.chan.send_data(body)

    def _fit_result(self, reply):
        """The result frame, cut down until it fits the server's frame limit."""
        lim = self.limits
        body = _frame_bytes(reply)
        if len(body) <= lim["frame"] and (_surely_fits(body, lim["depth"], lim["values"])
                                          or _fits(reply, lim["depth"], lim["values"])):
            return body
        if reply.get("listing") is not None:  # the server lists the files itself
            reply["listing"] = None
            body = _frame_bytes(reply)
            if len(body) <= lim["frame"] and _fits(reply, lim["depth"], lim["values"]):
                return body
        value, err = reply.get("value"), reply.get("error")
        for keep in (lim["text"], 1000):
            if value is not None:
                reply["value"] = {"text/plain": _cut(str(value.get("text/plain", "")), keep)}
            if err is not None:
                err["value"] = _cut(str(err.get("value", "")), keep)
                err["traceback"] = [_cut("".join(err.get("traceback", ())), keep)]
            body = _frame_bytes(reply)
            if len(body) <= lim["frame"]:
                break
        return body

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

    # --- the channel -------------------------------------------------------
    # Only the main thread reads the channel, so an execute goes from the
    # socket straight to the cell that runs it (no hand-off between threads).
    # Between cells it blocks in read(). While a cell runs, the socket is
    # O_ASYNC with the main thread (F_SETOWN_EX) as owner: a frame arriving
    # raises SIGIO there, whose handler reads what is there and acts on an
    # interrupt for the running cell; anything else waits in `pending`.
    # Between cells the handler leaves the socket to read() (a signal that
    # lands then only restarts it). Frames are parsed in the main thread
    # only, between bytecodes, so the buffer never has two users. Code that
    # takes SIGIO for itself (or blocks it) is then not interrupted: the
    # server kills the kernel once the grace period is over, as for code
    # that ignores KeyboardInterrupt.
    def _dispatch(self, msg):
        """An interrupt acted on; anything else kept for the main loop."""
        if msg.get("type") != "interrupt":
            self.pending.append(msg)
            return
        cell = msg.get("id", self.cell_id)
        if cell is None:
            return
        # Only the cell it names (ids are never reused): one naming a cell
        # about to start stops it as it starts (_guarded), a late one is
        # dropped.
        self.stop_id = cell
        if self.busy and self.cell_id == cell:
            self._interrupt_user()

    def on_sigio(self, signum, frame):
        if not self.busy or self.in_sigio:  # read() between cells takes what came
            return
        # A SIGIO that lands while this runs returns at once (two parsers
        # would tear the buffer): whatever it announced is found by the last
        # look at the socket below, made after the flag is down again.
        chan = self.chan
        fd = chan.fd
        msgs = []
        try:
            while True:
                self.in_sigio = True
                try:
                    while select.select([fd], [], [], 0)[0]:
                        if not chan.fill():  # the server is gone
                            os._exit(0)
                    msg = chan.next_frame()
                    while msg is not None:
                        msgs.append(msg)
                        msg = chan.next_frame()
                finally:
                    self.in_sigio = False
                if not select.select([fd], [], [], 0)[0]:
                    break
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # a channel it cannot read: end it, loudly
            _fatal("signal", e)
        # Interrupts last: the KeyboardInterrupt one raises leaves nothing
        # else unkept.
        for msg in msgs:
            if msg.get("type") != "interrupt":
                self._dispatch(msg)
        for msg in msgs:
            if msg.get("type") == "interrupt":
                self._dispatch(msg)

    def _async_channel(self):
        # SIGIO for the main thread alone (not a thread a cell started, whose
        # signal would not break the main thread's blocking calls).
        fd = self.chan.fd
        owner = _F_OWNER_TID.to_bytes(4, sys.byteorder) + _thread.get_native_id().to_bytes(4, sys.byteorder)
        fcntl.fcntl(fd, _F_SETOWN_EX, owner)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)

    def _flush_loop(self):
        try:
            seen = -1
            idle_since = time.monotonic()
            while True:
                time.sleep(_FLUSH_INTERVAL)
                now = time.monotonic()
                if self.busy:
                    for s in (self.stdout, self.stderr):
                        if s.parts and now - s.last_flush >= _FLUSH_INTERVAL and s.lock.acquire(False):
                            try:
                                s._flush_locked(now)
                            finally:
                                s.lock.release()
                if self.busy or seen != self.started:
                    seen = self.started
                    idle_since = now
                elif now - idle_since >= self.reader_idle:
                    with self.lock:
                        if seen == self.started:  # no cell began meanwhile
                            self.flusher = False
                            return
        except BaseException as e:
            _fatal("flusher", e)

    def _cell_starts(self):
        with self.lock:
            self.started += 1
            if self.flusher:
                return
            self.flusher = True
        # Started with SIGINT and SIGIO blocked, so neither lands on it.
        sigs = {_signal.SIGINT, _signal.SIGIO}
        _signal.pthread_sigmask(_signal.SIG_BLOCK, sigs)
        try:
            _thread.start_new_thread(self._flush_loop, ())
        except RuntimeError as e:  # no thread to be had (a pids limit): output comes at the end
            self.flusher = False
            sys.__stderr__.write("sandcastle kernel: no flusher thread (%s); output comes when the cell ends\n" % (e,))
        finally:
            _signal.pthread_sigmask(_signal.SIG_UNBLOCK, sigs)

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
        limits = msg.get("limits")
        if isinstance(limits, dict):
            for k, v in limits.items():
                if k in self.limits and type(v) is int and v > 0:
                    self.limits[k] = v
        saved = sys.stdout, sys.stderr, sys.stdin
        sys.stdout, sys.stderr = self.stdout, self.stderr
        sys.stdin = io.StringIO(msg.get("stdin", ""))
        self.stdout.last_flush = self.stderr.last_flush = time.monotonic()
        self.cell_id = cell
        self.chan.deferred = False
        if "matplotlib" in code or "matplotlib" in sys.modules:
            _quiet_matplotlib()
        self.busy = True
        # What came with or just after the execute (an interrupt for this
        # cell), its SIGIO spent while no cell ran. Mostly nothing: one look
        # then (a SIGIO from here on runs on_sigio itself, busy being set).
        if select.select([self.chan.fd], [], [], 0)[0] or self.chan.buf:
            self.on_sigio(None, None)
        try:
            value = self._guarded(code, filename, cell)
            if value is not None:
                self.ns["_"] = value
                reply["value"] = mime_bundle(value)
        except SystemExit as e:
            code_ = e.code
            if code_ is None:
                reply["exit_code"] = 0
            elif isinstance(code_, int):  # bool too; the server takes a 32-bit int
                reply["exit_code"] = int(code_) if -2**31 <= code_ < 2**31 else 1
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
        listing = msg.get("list")
        if isinstance(listing, dict):
            # The files the cell left, listed here after it: the server then
            # needs no second round trip to the file worker.
            try:
                reply["listing"] = _list_workspace(listing)
            except Exception:
                reply["listing"] = None
        self.chan.send_data(self._fit_result(reply))

    def _guarded(self, code, filename, cell):
        try:
            self.in_user = True
            if cell is not None and self.stop_id == cell:  # interrupted before it began
                raise KeyboardInterrupt
            return self._execute(code, filename)
        finally:
            self.in_user = False

    def _execute(self, code, filename):
        # Like Jupyter: the last statement, if an expression, is the result.
        bodies, last = compile_cell(code, filename)
        if self.chan.deferred:  # see on_sigint
            self.chan.deferred = False
            raise KeyboardInterrupt
        for co in bodies:
            r = eval(co, self.ns)
            if r is not None and co.co_flags & _CO_COROUTINE:  # top-level await
                _run_coroutine(r)
        if last is not None:
            r = eval(last, self.ns)
            if last.co_flags & _CO_COROUTINE:
                r = _run_coroutine(r)
            return r
        return None

    def _error(self, e):
        import linecache
        import traceback
        for name, src in self.sources.items():
            # Lines as the compiler counts them, each ending in "\n" (the
            # caret under a last line without one would sit a column right).
            lines = [ln + "\n" for ln in src.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
            linecache.cache[name] = (len(src), None, lines, name)
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
        self._interrupt_user()

    def _interrupt_user(self):
        # Only user code is interrupted; a late signal (the cell just ended)
        # must not break the driver's own bookkeeping.
        # Raised mid-frame it would leave the server a torn frame, and mid
        # _capture_compile it could leave the cell running untraced: there it
        # is held until the frame is written (Channel.send) or the cell is
        # compiled (_execute).
        if self.in_user:
            if self.chan.writer == self.main_ident or _capturing is not None:
                self.chan.deferred = True
            else:
                raise KeyboardInterrupt

    def serve(self):
        _signal.signal(_signal.SIGINT, self.on_sigint)
        _signal.signal(_signal.SIGIO, self.on_sigio)
        self._async_channel()
        chan = self.chan
        pending = self.pending
        while True:
            if pending:
                msg = pending.pop(0)
            else:
                try:
                    msg = chan.next_frame()
                    while msg is None:
                        if not chan.fill():  # the server is gone
                            os._exit(0)
                        msg = chan.next_frame()
                except BaseException as e:
                    _fatal("main", e)
            kind = msg.get("type")
            if kind == "shutdown":
                return
            if kind != "execute":
                self._dispatch(msg)  # an interrupt: no cell runs, dropped
                continue
            self._cell_starts()
            self.run_cell(msg)


def _fatal(who, e):
    try:
        sys.__stderr__.write("sandcastle kernel %s failed reading its channel: %r\n" % (who, e))
        sys.__stderr__.flush()
    finally:
        os._exit(70)


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
    # The channel must not leak into processes user code starts.
    try:
        os.set_inheritable(_CHANNEL_FD, False)
        os.set_blocking(_CHANNEL_FD, True)
        mode = os.fstat(_CHANNEL_FD).st_mode
    except OSError as e:
        mode = e
    if not isinstance(mode, int) or mode & 0o170000 != 0o140000:  # S_IFSOCK
        sys.stderr.write("sandcastle kernel: fd %d is not the server's channel (a connected unix socket): %s\n"
                         % (_CHANNEL_FD, mode if not isinstance(mode, int) else "not a socket"))
        sys.exit(2)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGINT})
    os.environ.setdefault("MPLBACKEND", "Agg")
    # Like an interactive interpreter: modules in the working directory import.
    sys.path[0] = ""
    chan = Channel(_CHANNEL_FD)
    try:
        chan.send({"type": "hello", "pid": os.getpid(), "version": sys.version.split()[0]})
    except OSError as e:
        sys.stderr.write("sandcastle kernel: cannot write to fd %d: %s\n" % (_CHANNEL_FD, e))
        sys.exit(2)
    kernel = Kernel(chan)
    del sys.argv[:]
    sys.argv.append("")
    kernel.serve()


if __name__ == "__main__":
    main()
