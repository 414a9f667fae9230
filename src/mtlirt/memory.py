"""Memory pages: numpy's huge-page advice off while mtlirt works (:func:`small_pages`).

numpy asks Linux for transparent huge pages for every array of 4 MB or more. The fits read their large
arrays in order, where huge pages save no measurable time, and allocate many of them afresh; where the
first touch of a huge page is slow (virtual machines that hand freed memory back to their host) those
allocations cost seconds of system time at the flagship shape (docs/results.md, "Hosts"). A user who sets
``NUMPY_MADVISE_HUGEPAGE`` decides for themselves: the setting is then left alone."""

from __future__ import annotations

import os
from contextlib import contextmanager

__all__ = ["small_pages"]


@contextmanager
def small_pages():
    """Within the block (or a function it decorates) numpy's arrays get no huge-page advice; the setting
    before it is restored after it. Nothing changes where ``NUMPY_MADVISE_HUGEPAGE`` is set or numpy has
    no such switch."""
    toggle = _toggle()
    if toggle is None or "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        yield
        return
    old = toggle(False)
    try:
        yield
    finally:
        toggle(old)


def _toggle():
    """numpy's switch of the advice (``numpy._core.multiarray._set_madvise_hugepage``: sets it, returns
    the previous setting), or None."""
    try:
        from numpy._core import multiarray
    except ImportError:  # pragma: no cover - numpy 1.x
        return None
    return getattr(multiarray, "_set_madvise_hugepage", None)
