"""Signals that stop a run (Ctrl-C, SIGTERM, a closed terminal's SIGHUP, and once a run starts SIGPIPE when the
reader of a piped output has left: ``Stop.watch``), taken at a point where the run can still be finished and marked.

``Stop`` installs one handler for all three. While armed, a signal raises ``Interrupted`` in the
main thread (papermill's wait for a cell included), and so does the next one should library code
have swallowed it; while held (making the run folder, and finishing the run: killing the kernel,
writing summary and index, moving ``latest``) a signal is only recorded, and ``arm`` raises it then.
A second Ctrl-C cannot cut the finishing short. ``received`` is the first signal, the exit status's.
"""

from __future__ import annotations

import os
import select
import signal
import stat
import sys
import threading
import warnings
from contextlib import contextmanager
from typing import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
BEFORE_START = "interrupted ({}) before any notebook started; nothing written"


def quit_at_once(signum, frame) -> None:
    """The runner's handler while it starts, before ``Stop``'s and before anything is made: one line
    on stderr, then exit at once (an exception could be lost in an import)."""
    try:
        os.write(2, f"runner.py: {BEFORE_START.format(signal.Signals(signum).name)}\n".encode())
    except OSError:  # the terminal is gone (a hang-up)
        pass
    os._exit(128 + signum)


class Interrupted(KeyboardInterrupt):
    """A stopping signal arrived; ``code`` is the exit status (128 + signal number). A
    KeyboardInterrupt, because asyncio (papermill's event loop) passes only that and SystemExit on:
    any other exception raised in one of its callbacks is logged and dropped, and one raised in a
    background task is kept in the task, and the run would go on."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.code = 128 + signum


class Stop:
    """The run's stopping signals: ``received`` is the first one's number, or None."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.armed = True
        self.previous: dict = {}  # the handlers ``installed`` and ``watch`` replaced

    def _handle(self, signum, frame) -> None:
        if self.received is None:
            self.received = signum
            quiet_aftermath()
        if self.armed:
            raise Interrupted(self.received)

    @contextmanager
    def installed(self) -> Iterator["Stop"]:
        """The handler in place for ``SIGNALS`` (armed), the previous ones back afterwards (SIGPIPE's too,
        where ``watch`` took it)."""
        self.previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
        try:
            yield self
        finally:
            for s, handler in self.previous.items():
                signal.signal(s, handler)

    def watch(self, stream) -> None:
        """Once a run starts: where ``stream`` is a pipe, SIGPIPE stops the run too, and ``watch_reader``
        raises it when the pipe's reader has left (before a run, ``runner.py --list | head`` ends quietly)."""
        if is_pipe(stream):
            self.previous.setdefault(signal.SIGPIPE, signal.signal(signal.SIGPIPE, self._handle))
            watch_reader(stream)

    def hold(self) -> None:
        """From now on a signal is recorded, not raised."""
        self.armed = False

    def arm(self) -> None:
        """Raise ``Interrupted`` for a signal recorded while held; else raise at the next one."""
        self.armed = True  # first: a signal from here on raises itself, one before is seen below
        if self.received is not None:
            raise Interrupted(self.received)


def quiet_aftermath() -> None:
    """Once a stop is received: no traceback for what the interruption left half-made. ``Interrupted`` can land
    inside a library's constructor (asyncio's event loop, as papermill starts a kernel), and the half-made
    object's finalizer then fails ("Exception ignored in ... AttributeError", a coroutine never awaited)."""
    sys.unraisablehook = lambda unraisable: None
    warnings.filterwarnings("ignore", message="coroutine .* was never awaited", category=RuntimeWarning)


def is_pipe(stream) -> bool:
    """Whether ``stream`` writes into a pipe (not a terminal, a file or a test's capture)."""
    try:
        return stat.S_ISFIFO(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):  # no file behind it
        return False


def watch_reader(stream) -> None:
    """Where ``stream`` is a pipe (``runner.py | head``), a daemon thread that raises SIGPIPE in this process
    once its reader has left (the pipe reports an error), so the run stops then, as interrupted, rather than
    at its next line of output minutes later."""
    if not is_pipe(stream):
        return
    fd = stream.fileno()

    def watch() -> None:
        poll = select.poll()
        poll.register(fd, select.POLLERR)
        while not any(ev & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _, ev in poll.poll(500)):
            pass
        signal.raise_signal(signal.SIGPIPE)

    threading.Thread(target=watch, name="watch-reader", daemon=True).start()
