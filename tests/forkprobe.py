"""A stand-in command for tests/test_forkserver.py: it says what it was given (argv, the
working directory, a variable, stdin) and ends as ``argv[1]`` asks."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time


def main() -> None:
    """Print what the process was given, then end as asked: ``exit N``, ``message``,
    ``raise``, ``atexit`` or ``thread``."""
    how = sys.argv[1]
    print("argv", sys.argv[1:])
    print("cwd", os.getcwd())
    print("var", os.environ.get("PROBE_VAR"))
    print("stdin", repr(sys.stdin.read()))
    print("to stderr", file=sys.stderr)
    if how == "exit":
        sys.exit(int(sys.argv[2]))
    if how == "message":
        sys.exit("a message on stderr")
    if how == "raise":
        raise RuntimeError("boom")
    if how == "atexit":
        atexit.register(lambda: print("at exit"))
    if how == "thread":  # a thread still running when main returns is joined first
        threading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()
    print("unflushed at exit", end="")


if __name__ == "__main__":
    main()
