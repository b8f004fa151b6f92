"""Stop requests from SIGTERM / SIGINT that survive a swallowed KeyboardInterrupt.

The CLI turns both signals into a KeyboardInterrupt. Python delivers it wherever
the main thread happens to be, and a backend can swallow it there (JAX runs a
garbage-collection callback that ignores exceptions), so the CLI also sets a flag
here, and long loops call `check()` after each step to stop at the next one.
"""

from __future__ import annotations

import threading

_requested = threading.Event()


def request_stop() -> None:
    _requested.set()


def clear() -> None:
    _requested.clear()


def requested() -> bool:
    return _requested.is_set()


def check() -> None:
    """Raise KeyboardInterrupt if a stop was requested."""
    if _requested.is_set():
        raise KeyboardInterrupt
