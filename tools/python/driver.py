# loom's Python driver: runs code cells in one persistent namespace, like a
# notebook kernel, for package tools/python.
#
# Protocol, on the stdin/stdout loom started it with: each message is a
# 4-byte big-endian length and that many bytes of JSON.
#   request:  {"code": str, "max_output": int}
#   response: {"output": str, "output_bytes": int, "error": bool, "note": str}
# "output" is the first max_output bytes of everything the cell wrote to
# stdout and stderr (its own prints, tracebacks, and its subprocesses' fd 1
# and 2), in order; "output_bytes" is the full size; "note" carries an error
# report that could not be written to the output.
import ast
import builtins
import io
import json
import linecache
import os
import struct
import sys
import tempfile
import traceback
import types


def read_exact(f, n):
    buf = b""
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def read_frame(f):
    head = read_exact(f, 4)
    if head is None:
        return None
    body = read_exact(f, struct.unpack(">I", head)[0])
    if body is None:
        return None
    return json.loads(body)


def write_frame(f, obj):
    body = json.dumps(obj).encode("utf-8")
    f.write(struct.pack(">I", len(body)) + body)
    f.flush()


def report(exc, filename):
    # Skip the driver's own frames: the model should see only its code.
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    try:
        text = "".join(traceback.format_exception(type(exc), exc, tb))
    except BaseException:
        text = "%s: %s\n" % (type(exc).__name__, exc)
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
        return ""
    except BaseException:
        return text


def run_cell(code, ns, filename, driver_pid):
    # Registered so tracebacks can quote the cell's lines.
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    try:
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec"), ns)
        if last is not None:
            value = eval(compile(last, filename, "eval"), ns)
            if value is not None:
                ns["_"] = value
                print(repr(value))
        return False, ""
    except BaseException as exc:
        return True, report(exc, filename)
    finally:
        # A process the cell forked comes back here too. It must never
        # reach the protocol: it would answer loom in the driver's place.
        if os.getpid() != driver_pid:
            os._exit(0)


def main():
    # The protocol moves to private descriptors, which programs the cell
    # starts do not inherit (Python's dup is non-inheritable); fd 0 becomes
    # /dev/null and fds 1 and 2 an unlinked file that collects each cell's
    # output, its subprocesses' included.
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    capture = tempfile.TemporaryFile()
    cap_fd = capture.fileno()
    os.dup2(cap_fd, 1)
    os.dup2(cap_fd, 2)
    # One unbuffered stream for both, so prints and tracebacks keep their
    # order with each other and with subprocess output.
    stream = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                              errors="backslashreplace", write_through=True)
    sys.stdout = sys.stderr = stream
    sys.stdin = open(os.devnull)

    main_mod = types.ModuleType("__main__")
    main_mod.__builtins__ = builtins
    sys.modules["__main__"] = main_mod
    ns = main_mod.__dict__
    driver_pid = os.getpid()
    n = 0
    while True:
        req = read_frame(proto_in)
        if req is None:
            return
        n += 1
        os.lseek(cap_fd, 0, os.SEEK_SET)
        os.ftruncate(cap_fd, 0)
        error, note = run_cell(req["code"], ns, "<cell-%d>" % n, driver_pid)
        try:
            stream.flush()
        except BaseException:
            pass
        size = os.fstat(cap_fd).st_size
        limit = max(0, int(req.get("max_output", 65536)))
        data = os.pread(cap_fd, limit, 0)
        text = data.decode("utf-8", "replace")
        if size > limit and text.endswith("\ufffd"):
            text = text[:-1]  # a character cut at the limit
        write_frame(proto_out, {"output": text, "output_bytes": size, "error": error, "note": note})


main()
