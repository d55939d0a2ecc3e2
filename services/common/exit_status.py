"""A process's end in words: ``exited (3)``, or the signal that killed it by name.

``subprocess`` reports a child killed by a signal as a negative return code (``-4``), which
says nothing to whoever reads a log. ``ttc stack`` and the policy's engine self-check both name
the signal instead (``SIGILL (illegal instruction)``), so a crash explains itself.
"""

from __future__ import annotations

import signal


def signal_label(signum: int) -> str:
    """``SIGILL (illegal instruction)``; an unknown number as ``signal 77``."""
    try:
        sig = signal.Signals(signum)
    except ValueError:
        return f"signal {signum}"
    description = signal.strsignal(sig) or ""
    return f"{sig.name} ({description[:1].lower()}{description[1:]})" if description else sig.name


def describe_exit(returncode: int) -> str:
    """How a child ended, from ``Popen.returncode``: ``exited (3)`` for an exit status,
    ``killed by SIGKILL (killed, -9)`` for a signal."""
    if returncode >= 0:
        return f"exited ({returncode})"
    label = signal_label(-returncode)
    if label.endswith(")"):
        return f"killed by {label[:-1]}, {returncode})"
    return f"killed by {label} ({returncode})"
