"""`python -m tapegrad`: the seed example, a small model trained by gradient descent, and a
loop recorded once and replayed in compiled code.

Times are given apart for first calls and for the steady state.  A first call does work a
later one does not: tapegrad's kernels are compiled by numba once per machine (on the first
run about 13 seconds in all on a 2-core machine, where a second process compiles part of
them, more on one CPU; most of it in the training and replay sections; numba's on-disk cache holds them after that, and a fresh process loads them in a
fraction of a second), and ``tapegrad.compile`` records a tape, then builds
generated code for it.  A call that takes more than a second prints a line saying so while it
runs, so that a first run does not look like a hang.
"""
import statistics
import textwrap
import threading
import time
from contextlib import contextmanager

import tapegrad as tg

SLOW = 1.0   # seconds before a call says that numba is compiling
# what numba compiles on a machine's first run, by call of a compiled function
COMPILED_ON_CALL = {1: "tapegrad's recording kernels", 2: "the replay kernels"}


@contextmanager
def _says_if_slow(what="tapegrad's kernels"):
    """Print a line saying that numba is compiling ``what`` if the call takes over ``SLOW``."""
    timer = threading.Timer(SLOW, lambda: print(
        f"  ... numba is compiling {what}: once per machine, later runs load them from its "
        "cache", flush=True))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _ms(seconds):
    return f"{seconds * 1e3:9.3f} ms"


def seed_example():
    print("# the autograd example")
    x = tg.ones(2, 2, requires_grad=True)
    y = x + 2
    print(">>> y = x + 2")
    print(y)
    print(">>> y.grad_fn, x.grad_fn")
    print((y.grad_fn, x.grad_fn))
    z = y * y * 3
    out = z.mean()
    print(">>> out = (y * y * 3).mean(); out.backward(); x.grad", flush=True)
    start = time.perf_counter()
    with _says_if_slow():
        out.backward()
    took = time.perf_counter() - start
    print(x.grad)
    print(f"(this first backward of the process took {_ms(took).strip()}: it loads the compiled "
          "sweep from numba's cache in a fraction of a second; on a machine's first run numba "
          "compiles it and the rules of the ops it meets, a few seconds)")


def train():
    print("\n# fitting y = sin(3x) with a 1-32-1 tanh network, plain SGD", flush=True)
    tg.manual_seed(0)
    x = tg.linspace(-1, 1, 64).reshape(64, 1)
    y = tg.sin(3 * x)
    w1 = (tg.randn(1, 32) * 1.0).requires_grad_()
    b1 = tg.zeros(32, requires_grad=True)
    w2 = (tg.randn(32, 1) / 32 ** 0.5).requires_grad_()
    b2 = tg.zeros(1, requires_grad=True)
    params = [w1, b1, w2, b2]

    def step():
        loss = ((tg.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with tg.no_grad():
            for p in params:
                p -= 0.1 * p.grad
        return loss

    steps = 500
    start = time.perf_counter()
    with _says_if_slow():
        loss = step()
    first = time.perf_counter() - start
    print(f"step {0:4d}  loss {loss.item():.6f}")
    start = time.perf_counter()
    for k in range(1, steps + 1):
        loss = step()
        if k % 100 == 0:
            print(f"step {k:4d}  loss {loss.item():.6f}")
    steady = (time.perf_counter() - start) / steps
    print(f"first step {_ms(first).strip()}; steps 1-{steps}: {1 / steady:.0f} per second "
          f"({steady * 1e6:.0f} µs each)")


def replay(steady_calls=200):
    print("\n# the same kind of loop, recorded once and replayed compiled: Lotka-Volterra, "
          "1000 explicit Euler steps of 11 scalar ops", flush=True)
    params = [tg.tensor(v, requires_grad=True) for v in (1.5, 1.0, 3.0, 1.0)]

    @tg.compile
    def ode_loss(a, b, c, d):
        u, v = tg.tensor(1.0), tg.tensor(1.0)
        for _ in range(1000):
            uv = u * v
            u, v = u + 0.01 * (a * u - b * uv), v + 0.01 * (d * uv - c * v)
        return (u - 1.5) ** 2 + (v - 0.5) ** 2

    def call():
        for p in params:
            p.grad = None
        start = time.perf_counter()
        loss = ode_loss(*params)
        loss.backward()
        return loss, time.perf_counter() - start

    print("first calls (forward + backward each):")
    replays = 0
    for k in range(1, 5):
        before = ode_loss.stats.as_dict()
        with _says_if_slow(COMPILED_ON_CALL.get(k, "the generated code")):
            loss, took = call()
        after = ode_loss.stats.as_dict()
        if after["records"] > before["records"]:
            what = "records the tape (runs eagerly, once per input shape)"
        elif after["generated"] > before["generated"]:
            what = "generates code for the tape (numba compiles it once per tape and machine)"
        else:
            replays += 1
            what = ("first replay, interpreted (loads the replay kernels, compiled once per machine)" if replays == 1
                    else "replays, interpreted")
        print(f"  call {k}  {_ms(took)}  {what}")

    times = [call()[1] for _ in range(steady_calls)]
    loss = ode_loss(*params)
    for p in params:
        p.grad = None
    loss.backward()
    print(f"steady state: calls 5-{4 + steady_calls} replay the generated code, "
          f"{statistics.median(times) * 1e6:.1f} µs per call (median)")
    print(f"loss {loss.item():.6f}   dloss/da {params[0].grad.item():.6f}")
    print(f"\n>>> ode_loss.stats\n{ode_loss.stats}")
    print(stats_in_words(ode_loss.stats))


def _count(n, one, many):
    return f"{n} {one if n == 1 else many}"


def stats_in_words(stats):
    """What a compiled function's ``stats`` counts, said in words."""
    s = stats.as_dict()
    lines = [
        f"that is: {_count(s['calls'], 'call', 'calls')} in all; "
        f"{_count(s['records'], 'call', 'calls')} ran the Python function and recorded a tape "
        f"(records), {_count(s['replays'], 'call', 'calls')} replayed a recorded tape in "
        f"compiled code (replays), {_count(s['eager'], 'call', 'calls')} ran eagerly (eager);",
        f"{_count(len(s['rerecords']), 'recording was', 'recordings were')} made because a "
        "guard saw the Python code take another branch (rerecords); "
        f"{_count(s['generated'], 'tape was', 'tapes were')} turned into generated code "
        "(generated).",
    ]
    lines += [f"ran eagerly because: {reason}" for reason in s["eager_reasons"]]
    lines += [f"no generated code because: {reason}" for reason in s["not_generated"]]
    return "\n".join(textwrap.fill(line, 95) for line in lines)


if __name__ == "__main__":
    seed_example()
    train()
    replay()
