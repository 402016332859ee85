"""A Ctrl-C lost at ``kith chat``'s prompt is sent again (gateway/cli/chat_interrupt.py).

The race itself (a SIGINT between readline drawing the prompt and its ``select()``) cannot be had on
demand, so a child in a real pty, waiting in readline's ``input()``, is given what that race leaves:
the byte the signal's C handler wrote to the wakeup descriptor, and no interrupt. With the guard it
leaves at once; without it, it waits on (what a CI run of the pty tests showed).
"""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import textwrap
import time

from tests.kith_run import ROOT

CHILD = textwrap.dedent("""
    import os, signal, sys, threading
    from gateway.cli.chat_interrupt import NUDGE
    signal.signal(signal.SIGINT, signal.default_int_handler)
    guarded = sys.argv[1] == "guarded"
    if guarded:
        NUDGE.install()
        wake = signal.set_wakeup_fd(-1)
        signal.set_wakeup_fd(wake)
    go = int(sys.argv[2])

    def lost_interrupt():
        os.read(go, 1)  # the test saw the prompt: input() is waiting
        if guarded:
            os.write(wake, bytes([signal.SIGINT]))  # all a lost SIGINT leaves behind

    threading.Thread(target=lost_interrupt, daemon=True).start()
    import readline  # noqa: F401  (input() through readline, as kith chat's)
    try:
        with NUDGE.reading():
            input("> ")
    except KeyboardInterrupt:
        print("LEFT", flush=True)
        sys.exit(0)
    print("TYPED", flush=True)
""")


def _run(mode: str, wait_s: float) -> tuple[int | None, str]:
    go_read, go_write = os.pipe()
    os.set_inheritable(go_read, True)  # across the child's exec
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(ROOT)
        os.execv(sys.executable, [sys.executable, "-c", CHILD, mode, str(go_read)])
    os.close(go_read)
    out = b""
    try:
        deadline = time.monotonic() + 30
        while b"> " not in out and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                out += os.read(fd, 4096)
        assert b"> " in out, out
        os.write(go_write, b"x")
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                try:
                    while select.select([fd], [], [], 0.1)[0]:
                        out += os.read(fd, 4096)
                except OSError:
                    pass
                return os.waitstatus_to_exitcode(status), out.decode(errors="replace")
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    out += os.read(fd, 4096)
                except OSError:
                    pass
        return None, out.decode(errors="replace")
    finally:
        os.close(go_write)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)


def test_a_lost_interrupt_at_the_prompt_is_sent_again() -> None:
    code, out = _run("guarded", wait_s=20)
    assert code == 0 and "LEFT" in out, out


def test_without_the_guard_the_prompt_waits_on() -> None:
    """The scenario above is a hang without the guard: what the first test checks is the guard."""
    code, out = _run("unguarded", wait_s=1.5)
    assert code is None and "LEFT" not in out, out
