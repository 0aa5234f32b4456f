"""Process helpers shared by the harness modules (stdlib only)."""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1
_libc = None


def _load_libc():
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(None, use_errno=True)
            lib.prctl  # noqa: B018 - make sure the symbol exists
            _libc = lib
        except (OSError, AttributeError):
            _libc = False
    return _libc or None


def _pdeathsig_preexec() -> None:  # runs in the child between fork and exec
    if _libc:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def die_with_parent_preexec():
    """A ``preexec_fn`` making the child get SIGKILL when the spawning thread
    dies (Linux PR_SET_PDEATHSIG), or None where prctl is unavailable."""
    return _pdeathsig_preexec if _load_libc() is not None else None
