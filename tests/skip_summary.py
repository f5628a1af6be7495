"""One line at the end of a test run that sums up the skips.

A test here skips only when an optional peer is not installed: a Python package that
``pytest.importorskip`` could not import (PyTorch, the oracle most tests compare against;
the notebook runners), or a program that a skip names with ``optional peer not installed:``
(Graphviz's ``dot``).  Those skips are counted per peer on one line with how to install
them, instead of one ``SKIPPED`` line per test; any other skip is listed on its own line, so
it cannot hide among them.  ``-rs`` still lists every skip.
"""
import re

# pytest.importorskip's reason: "could not import 'torch': No module named 'torch'"
IMPORT_SKIP = re.compile(r"could not import '([\w.]+)'")
PEER_SKIP = re.compile(r"optional peer not installed: (.+?)(?: \(|$)")
TEST_EXTRA = 'pip install -e ".[test]"'
INSTALL = {"Graphviz's dot program": "apt-get install graphviz"}


def missing_peer(reason):
    """The optional peer whose absence a skip's reason names, or None."""
    found = IMPORT_SKIP.search(reason) or PEER_SKIP.search(reason)
    return found.group(1) if found else None


def skip_reason(report):
    """The reason of a skipped test report (pytest stores (path, line, reason))."""
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def summary_lines(reports):
    """The lines that sum up the skipped ``reports``: one for every missing peer together,
    then one per skip that is not a missing peer's."""
    per_peer, others = {}, []
    for report in reports:
        reason = skip_reason(report)
        peer = missing_peer(reason)
        if peer is None:
            others.append(f"SKIPPED (not a missing optional peer) {report.nodeid}: {reason}")
        else:
            per_peer[peer] = per_peer.get(peer, 0) + 1
    lines = []
    if per_peer:
        count = sum(per_peer.values())
        peers = ", ".join(f"{peer} ({n}; {INSTALL.get(peer, TEST_EXTRA)})"
                          for peer, n in sorted(per_peer.items()))
        lines.append(f"{count} skipped because optional peers are not installed: {peers}")
    return lines + others


def pytest_terminal_summary(terminalreporter):
    for line in summary_lines(terminalreporter.stats.get("skipped", [])):
        terminalreporter.write_line(line, yellow=True)
