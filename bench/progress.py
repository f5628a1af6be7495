"""A progress bar on stderr: tqdm when it is importable, plain text lines otherwise.

Totals are not known up front (the number of rounds depends on the calibration), so the
bar can grow with ``add_total``. Output goes to stderr so stdout carries only the report.
"""
from __future__ import annotations

import sys
import time

try:
    from tqdm import tqdm as _tqdm
except ImportError:  # the plain fallback below is enough
    _tqdm = None


class Progress:
    """``with Progress("W2", total=7) as bar: bar.update()``."""

    def __init__(self, desc: str, total: int = 0, enabled: bool = True):
        self.desc, self.total, self.done = desc, total, 0
        self.enabled = enabled
        self._bar = None
        self._last_print = 0.0
        if enabled and _tqdm is not None:
            self._bar = _tqdm(total=total, desc=desc, unit="batch", file=sys.stderr,
                              leave=False, dynamic_ncols=True)

    def add_total(self, n: int) -> None:
        self.total += n
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.refresh()

    def update(self, n: int = 1, status: str | None = None) -> None:
        self.done += n
        if self._bar is not None:
            if status:
                self._bar.set_postfix_str(status, refresh=False)
            self._bar.update(n)
        elif self.enabled:
            now = time.monotonic()
            if now - self._last_print >= 2.0 or self.done >= self.total:
                self._last_print = now
                extra = f" {status}" if status else ""
                print(f"  {self.desc}: {self.done}/{self.total}{extra}", file=sys.stderr,
                      flush=True)

    def status(self, text: str) -> None:
        """Say what is running now (a first call can take seconds)."""
        if self._bar is not None:
            self._bar.set_postfix_str(text)
        elif self.enabled:
            print(f"  {self.desc}: {text}", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def log(message: str) -> None:
    """A line on stderr that does not tear an active tqdm bar."""
    if _tqdm is not None:
        _tqdm.write(message, file=sys.stderr)
    else:
        print(message, file=sys.stderr, flush=True)
