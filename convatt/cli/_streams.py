"""Standard output that is closed, or a pipe whose reader has gone (`convatt tag RUN | head -1`).

A command started with standard output closed (`>&-`) whose product goes there (the tagged
text, the scores, the status) fails at once, as `cat >&-` does ("Bad file descriptor"): its
product would be lost. One whose product is files (`train`, `inspect`, `tables`, `plot`)
runs with its progress lines discarded. One whose reader goes away stops quietly, with the
status a shell reports for a writer stopped by SIGPIPE, as `cat` or `grep` do."""

from __future__ import annotations

import errno
import os
import select
import signal
import sys

READER_GONE = 128 + signal.SIGPIPE  # 141: what a shell reports for a writer whose reader has gone


CLOSED = "standard output is closed (Bad file descriptor)"


def closed_stdout_message(product: str, where_else: str = "") -> str:
    """The error of a command whose `product` would go to a closed standard output."""
    return f"{CLOSED}, and {product} would go there: redirect it to a file (> FILE){where_else}"


def open_closed_stdout() -> bool:
    """If standard output was closed when the process started (Python then sets sys.stdout to
    None), point file descriptor 1 and sys.stdout at /dev/null: writes are discarded instead of
    failing, and no file the command opens can take descriptor 1 and receive stray output.
    Whether it was closed."""
    if sys.stdout is not None:
        return False
    try:
        os.fstat(1)
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != 1:
            os.dup2(devnull, 1)
            os.close(devnull)
    sys.stdout = open(1, "w", closefd=False)  # kept open for the life of the process
    return True


def stdout_gone(error: BaseException) -> bool:
    """Whether `error`, or the error it was raised from (a ConvattError made of an OSError while
    training), is a write to a standard output that cannot be written any more: a broken pipe
    (its reader has gone) or a closed descriptor; not an EPIPE from anything else."""
    while error is not None and not isinstance(error, OSError):
        error = error.__cause__
    if error is None or error.errno not in (errno.EPIPE, errno.EBADF):
        return False
    try:
        os.fstat(1)
    except OSError:
        return True  # closed
    if not hasattr(select, "poll"):
        return error.errno == errno.EPIPE
    poller = select.poll()
    poller.register(1, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def discard_stdout() -> None:
    """Send what is still buffered for standard output, and all later writes, to /dev/null, so
    that Python's flush at exit does not fail again ("Exception ignored ... BrokenPipeError")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
