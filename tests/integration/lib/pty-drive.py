#!/usr/bin/env python3
"""Drive a command through a pseudo-terminal: a script of steps on argv.

    pty-drive.py CMD... :: STEP...

Each STEP is `expect:TEXT` (read until TEXT appears in the output),
`send:TEXT` (type TEXT; `\\r` and `\\x03` escapes work), `size:ROWSxCOLS`
(resize the terminal, which sends the command SIGWINCH) or `kill:SIG`
(send the command a signal, e.g. `kill:TERM`). At the end the
output is read to its end; the command's exit status is printed as
`exit=N` on stderr, and this script exits with it. No step has a deadline
here: the test runner bounds the whole run."""
import os
import signal
import pty
import struct
import sys
import fcntl
import termios


def main():
    sep = sys.argv.index("::")
    cmd, steps = sys.argv[1:sep], sys.argv[sep + 1:]
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    seen = b""

    def read_more():
        nonlocal seen
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        seen += data
        return data

    for step in steps:
        kind, _, arg = step.partition(":")
        if kind == "expect":
            want = arg.encode()
            while want not in seen:
                if not read_more():
                    sys.stderr.write(f"pty-drive: output ended before {arg!r}\n")
                    sys.exit(100)
            seen = seen[seen.index(want) + len(want):]
        elif kind == "send":
            os.write(fd, arg.encode().decode("unicode_escape").encode())
        elif kind == "kill":
            os.kill(pid, getattr(signal, "SIG" + arg))
        elif kind == "size":
            rows, cols = (int(v) for v in arg.split("x"))
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    while read_more():
        pass
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    sys.stderr.write(f"exit={code}\n")
    sys.exit(code if code >= 0 else 128 - code)


main()
