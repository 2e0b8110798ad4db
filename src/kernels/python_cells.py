# sandcastle's Python kernel driver, part 1 of 2: compiling a cell. The
# build joins this file and python_driver.py, in that order, into the one
# driver file published to /opt/sandcastle (cmake/embed.cmake); run from the
# source tree, join them the same way (tests/unit/kernels/drivers.test.mjs).
# Kept apart only to keep each file readable; they share one module's globals.
import _imp
import sys

_PyCF_ALLOW_TOP_LEVEL_AWAIT = 0x2000
_CO_COROUTINE = 0x80
_SPLIT_TRIES = 50
_COMPOUND = frozenset(("if", "for", "while", "with", "try", "def", "class", "async"))
_CLAUSES = frozenset(("else", "elif", "except", "finally"))
_STATEMENT_WORDS = _COMPOUND | _CLAUSES | frozenset((
    "import", "from", "return", "del", "pass", "raise", "global", "nonlocal", "assert", "break", "continue"))
_ASSIGN_OPS = ("=", "+=", "-=", "*=", "/=", "%=", "@=", "&=", "|=", "^=", "//=", "**=", ">>=", "<<=")


# --- compiling a cell -------------------------------------------------------
# The cell's last statement, if an expression, is evaluated on its own and its
# value is the result (Jupyter's Out). Finding it takes no AST: builtin
# compile() builds every AST node type on its first call in a process (~170
# KiB that would stay with the kernel for good), so cells are compiled with
# exec()/eval() of the source, which do not, stopped before the code's first
# instruction (_capture_compile).
#
# The split: a top-level statement starts at column 0. Walking such lines up
# from the bottom, the first line L where both the text above it (head) and
# the text from it (tail) compile is the last statement's start. Why a split
# where both sides compile is a real statement boundary: the tokenizer reads
# left to right, so on the head it does exactly what it does on the cell's
# first part; a string, bracket or backslash continuation open across L would
# leave the head unterminated, and it compiles. So at L the tokenizer is at
# the start of a logical line with nothing open, and the line begins at indent
# 0: a new statement, unless it continues one above (else/elif/except/
# finally), which no tail that compiles on its own can begin with. The same
# holds for a ';' split (`a = 1; a`): the left part compiling proves the ';'
# is a real token, not inside a string or brackets, and ")" appended to it
# must then fail, else the ';' sat in a comment; the statement around it must
# be a simple one (in `if x: a; b`, b is the if's).
# Line numbers stay the user's: a tail is compiled after the head's newlines,
# a part that starts mid-line after as many form feeds as the line has bytes
# before it (a form feed resets the indent count, so columns in tracebacks
# stay right too). A cell nothing splits is compiled whole, which gives a
# syntax error its usual report.


# ([code objects to exec in turn], eval code object of the last expression
# or None).
def compile_cell(code, filename):
    """compile_cell_uncached, remembered for short cells run again (a
    polling loop, `x += 1`): a code object runs any number of times, and
    compiling is most of such a cell's cost. Only code objects without
    nested ones (functions, classes, comprehensions) are kept: renaming one
    for its new cell then touches nothing an earlier cell still uses."""
    hit = _compiled.get(code) if len(code) <= _CACHE_CODE_CHARS else None
    if hit is not None:
        del _compiled[code]
        _compiled[code] = hit  # most recent last
        bodies, last = hit
        for co in (*bodies, last):
            if co is not None:
                _imp._fix_co_filename(co, filename)
        return list(bodies), last
    bodies, last = compile_cell_uncached(code, filename)
    if len(code) <= _CACHE_CODE_CHARS and not any(
            isinstance(c, _CodeType) for co in (*bodies, last) if co is not None for c in co.co_consts):
        if len(_compiled) >= _CACHE_CELLS:
            del _compiled[next(iter(_compiled))]
        _compiled[code] = (tuple(bodies), last)
    return bodies, last


_CACHE_CELLS = 32
_CACHE_CODE_CHARS = 512
_CodeType = type(compile_cell.__code__)
_compiled = {}  # cell source -> (bodies, last), least recently used first


def compile_cell_uncached(code, filename):
    # Top-level await needs compile()'s flag (and an `async def` cell gets it too).
    flagged = "await" in code or "async" in code

    def comp(src, mode="exec"):
        if flagged:
            return compile(src, filename, mode, _PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return _capture_compile(src, filename, mode)

    if "global" in code or "__future__" in code:
        # Checks that span statements (a global after an assignment, a
        # future import below the top): parts that compile alone need not
        # make a cell that does, so the cell is compiled whole first.
        whole = comp(code)
        bodies, last = _split_cell(code, comp)
        return ([whole], None) if last is None else (bodies, last)
    return _split_cell(code, comp)


class _Captured(BaseException):
    pass


_capturing = None  # the cell's file name while _capture_compile runs


def _capture_compile(src, filename, mode):
    # compile(src, filename, mode) without builtin compile(): exec/eval
    # compile the source and start its frame, whose 'call' trace event comes
    # before its first instruction; the trace function takes the code object
    # there and stops the frame. It lets any other Python code that runs
    # meanwhile (a warning shown, a weakref callback) run untouched: raising
    # there would unset it.
    global _capturing
    if sys.gettrace() is not None:  # a debugger or coverage: leave its tracing alone
        return compile(src, filename, mode, _PyCF_ALLOW_TOP_LEVEL_AWAIT)
    _capturing = filename
    sys.settrace(_take_code)
    try:
        (exec if mode == "exec" else eval)(src, {})
    except _Captured as c:
        co = c.args[0]
    except SyntaxError as e:
        e.filename = filename
        raise
    else:
        raise SystemError("a cell's code ran while being compiled")
    finally:
        sys.settrace(None)
        _capturing = None
    _imp._fix_co_filename(co, filename)  # "<string>" -> the cell's name, nested code too
    return co


def _take_code(frame, event, arg):
    if event == "call":
        code = frame.f_code
        if code.co_name == "<module>" and frame.f_back is not None \
                and frame.f_back.f_code is _capture_compile.__code__:
            raise _Captured(code)
        if code.co_name == "_showwarnmsg":  # a compiler warning names the cell, not "<string>"
            msg = frame.f_locals.get("msg")
            if getattr(msg, "filename", None) == "<string>":
                msg.filename = _capturing
    return None


def _try_compile(comp, src, mode="exec"):
    try:
        return comp(src, mode)
    except (SyntaxError, ValueError):
        return None


def _split_cell(code, comp):
    text = code
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text[-1:] in (" ", "\t", "\f"):  # eval mode rejects a last line of only blanks
        text += "\n"
    end = len(text)  # the line ending here is the next to look at
    tries = 0
    while end >= 0 and tries < _SPLIT_TRIES:
        start = text.rfind("\n", 0, end) + 1
        next_end = start - 1
        if text[start:start + 1] not in ("", " ", "\t", "\f", "#", "\n"):
            tries += 1
            line = text.count("\n", 0, start)
            tail = text[start:]
            src = "\n" * line + tail if line else tail
            # _is_statement spares `x += 1` a failed compile.
            last = None if _is_statement(tail) else _try_compile(comp, src, "eval")
            body = None if last is not None else _try_compile(comp, src)
            if last is not None:  # an expression, if L is a boundary
                head = _compile_head(text, start, comp)
                if head is not None:
                    return head, last
            elif body is not None:  # a statement, not an expression
                head = _compile_head(text, start, comp)
                if head is not None:
                    if ";" in tail:  # `a = 1; a`
                        parts = _split_semicolon(tail, line, comp)
                        if parts is not None:
                            return head + parts[0], parts[1]
                    return head + [body], None
            elif _first_word(tail) not in _CLAUSES:
                # L is inside the last statement and, not starting a clause
                # (else: ...), lies in a string, brackets or a continuation
                # opened between that statement's start and L: no line below
                # the nearest line that could open one can be the start.
                d = max(text.rfind("(", 0, start), text.rfind("[", 0, start),
                        text.rfind("{", 0, start), text.rfind('"""', 0, start),
                        text.rfind("'''", 0, start), text.rfind("\\\n", 0, start))
                next_end = text.find("\n", d) if d >= 0 else -1
        end = next_end
    return [comp(code)], None


# Whether the tail plainly starts a statement (a keyword, `name =`,
# `name += ...`): no expression starts so.
def _is_statement(tail):
    word = _first_word(tail)
    if word in _STATEMENT_WORDS:
        return True
    rest = tail[len(word):len(word) + 8].lstrip(" \t")
    return bool(word) and rest.startswith(_ASSIGN_OPS) and not rest.startswith("==")


def _first_word(s):
    i = 0
    while i < len(s) and (s[i].isalnum() or s[i] == "_"):
        i += 1
    return s[:i]


# [code of the lines above `start`] ([] if only blanks and comments), or None
# when they do not compile.
def _compile_head(text, start, comp):
    i = 0
    while i < start:
        j = text.find("\n", i, start)
        if j < 0:
            j = start
        ln = text[i:j].lstrip(" \t\f")
        if ln and ln[0] != "#":
            co = _try_compile(comp, text[:start])
            return None if co is None else [co]
        i = j + 1
    return []


def _blank(s):
    for ln in s.split("\n"):
        ln = ln.lstrip(" \t\f")
        if ln and ln[0] != "#":
            return False
    return True


# A part of a line without the backslash that joined it to the next line
# (`x = 1 \` then `; y`).
def _unjoined(part):
    part = part.rstrip(" \t\f")
    return part[:-2] if part.endswith("\\\n") else part


# ([code before the last ';'], eval code after it) when the tail's last simple
# statement is an expression; None otherwise.
def _split_semicolon(tail, line, comp):
    word = _first_word(tail)
    nl = tail.find("\n")
    if tail[0] == "@" or word in _COMPOUND or (word == "match" and nl > 0 and "case" in tail[nl:]):
        return None  # a compound statement: its ';'s are inside its body
    end = len(tail)
    p = tail.rfind(";")
    tries = 0
    while tries < _SPLIT_TRIES:
        seg_start = p + 1
        if _blank(tail[seg_start:end]):
            if p < 0:
                return None
            end = p  # a trailing ';' (`x;`): what precedes it is the statement
            p = tail.rfind(";", 0, p)
            continue
        if p < 0 and end == len(tail):
            return None  # the whole tail, already known not to be an expression
        tries += 1
        j = seg_start
        while tail[j] in " \t\f\n":
            j += 1
        ls = tail.rfind("\n", 0, j) + 1
        col = len(tail[ls:j].encode("utf-8", "surrogatepass"))
        src = "\n" * (line + tail.count("\n", 0, j)) + "\f" * col + _unjoined(tail[j:end])
        last = _try_compile(comp, src, "eval")
        if last is not None:
            if p < 0:
                return [], last
            left = _unjoined(tail[:p])
            left_line = left[left.rfind("\n") + 1:]
            left = "\n" * line + left
            body = _try_compile(comp, left)
            if body is not None and ("#" not in left_line or _try_compile(comp, left + ")") is None):
                return [body], last
        if p < 0:
            return None
        p = tail.rfind(";", 0, p)
    return None
