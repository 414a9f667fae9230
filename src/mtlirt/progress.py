"""Progress display for long work (a tqdm bar on a terminal, silent otherwise)."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager


def enabled() -> bool:
    """Progress is shown when stderr is a terminal, unless ``MTLIRT_PROGRESS=0``; ``MTLIRT_PROGRESS=1`` forces it."""
    flag = os.environ.get("MTLIRT_PROGRESS")
    if flag is not None:
        return flag not in ("0", "", "false", "no")
    return sys.stderr.isatty()


@contextmanager
def progress_bar(total: int, desc: str):
    """A tqdm progress bar (or a silent stand-in) used as a context manager."""
    if enabled():
        from tqdm.auto import tqdm

        with tqdm(total=total, desc=desc, file=sys.stderr, leave=False) as bar:
            yield bar
    else:
        class _Silent:
            def update(self, n=1):
                pass

            def set_postfix_str(self, s):
                pass

        yield _Silent()


def stage(message: str) -> None:
    """Announce a stage of a long job on stderr when progress is enabled."""
    if enabled():
        print(f"mtlirt: {message}", file=sys.stderr, flush=True)
