"""``python -m tapegrad``, the README's first command: it runs, keeps first calls apart from
the steady state, and its words about ``stats`` say the numbers ``stats`` holds."""
import re
import subprocess
import sys

import tapegrad as tg
from tapegrad.__main__ import stats_in_words


def test_the_demo_runs_and_separates_first_calls_from_the_steady_state():
    done = subprocess.run([sys.executable, "-m", "tapegrad"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "grad_fn=<AddBackward0>" in out and "4.5000" in out
    assert re.search(r"^first step +[\d.]+ ms; steps 1-500: \d+ per second", out, re.M)
    calls = re.findall(r"^  call (\d)  +[\d.]+ ms  (\w+)", out, re.M)
    assert calls == [("1", "records"), ("2", "first"), ("3", "replays"), ("4", "generates")]
    assert re.search(r"^steady state: calls 5-204 replay the generated code, [\d.]+ µs per "
                     r"call \(median\)$", out, re.M)
    stats = re.search(r"^Stats\(calls=(\d+), replays=(\d+), records=(\d+)", out, re.M)
    assert stats.groups() == ("205", "204", "1")
    words = " ".join(out.split())
    assert "204 calls replayed a recorded tape in compiled code (replays)" in words


def test_stats_in_words_says_what_stats_counts():
    @tg.compile
    def f(x):
        return (x * x).sum() if x.sum() > 0 else (x * 3).sum()

    for sign in (1.0, 1.0, -1.0, -1.0, -1.0):
        f(tg.ones(3) * sign)
    words = " ".join(stats_in_words(f.stats).split())
    s = f.stats
    assert f"{s.calls} calls in all" in words
    assert f"{s.records} calls ran the Python function and recorded a tape (records)" in words
    assert f"{s.replays} calls replayed a recorded tape in compiled code (replays)" in words
    assert f"{len(s.rerecords)} recording was made because a guard" in words
    assert s.records == 2 and len(s.rerecords) == 1
