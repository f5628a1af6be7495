"""The skip summary (skip_summary.py) in a pytest run of its own: skips for missing optional
peers are summed up on one line, any other skip is listed on its own."""
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent

SUITE = '''
import shutil
import pytest

def test_needs_a_missing_package():
    pytest.importorskip("tapegrad_no_such_peer")

def test_needs_it_too():
    pytest.importorskip("tapegrad_no_such_peer")

def test_needs_a_program():
    if shutil.which("tapegrad-no-such-program") is None:
        pytest.skip("optional peer not installed: tapegrad-no-such-program (not on PATH)")

def test_skipped_for_another_reason():
    pytest.skip("not ready")

def test_runs():
    pass
'''


def run_suite(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "from skip_summary import pytest_terminal_summary  # noqa: F401\n")
    (tmp_path / "test_suite.py").write_text(SUITE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(TESTS)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def test_missing_peers_are_one_line_and_other_skips_are_named(tmp_path):
    lines = run_suite(tmp_path)
    peers = [line for line in lines if "optional peers are not installed" in line]
    assert peers == [
        "3 skipped because optional peers are not installed: "
        "tapegrad-no-such-program (1; pip install -e \".[test]\"), "
        "tapegrad_no_such_peer (2; pip install -e \".[test]\")"]
    others = [line for line in lines if "not a missing optional peer" in line]
    assert len(others) == 1
    assert "test_skipped_for_another_reason" in others[0] and others[0].endswith("not ready")
    assert lines[-1].startswith("1 passed, 4 skipped")
