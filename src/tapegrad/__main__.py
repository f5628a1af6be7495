"""`python -m tapegrad`: the seed example, then a small model trained by gradient descent."""
import time

import tapegrad as tg


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
    print(">>> out = (y * y * 3).mean(); out.backward(); x.grad")
    out.backward()
    print(x.grad)


def train():
    print("\n# fitting y = sin(3x) with a 1-32-1 tanh network, plain SGD")
    tg.manual_seed(0)
    x = tg.linspace(-1, 1, 64).reshape(64, 1)
    y = tg.sin(3 * x)
    w1 = (tg.randn(1, 32) * 1.0).requires_grad_()
    b1 = tg.zeros(32, requires_grad=True)
    w2 = (tg.randn(32, 1) / 32 ** 0.5).requires_grad_()
    b2 = tg.zeros(1, requires_grad=True)
    params = [w1, b1, w2, b2]
    start = time.perf_counter()
    for step in range(501):
        loss = ((tg.tanh(x @ w1 + b1) @ w2 + b2 - y) ** 2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with tg.no_grad():
            for p in params:
                p -= 0.1 * p.grad
        if step % 100 == 0:
            print(f"step {step:4d}  loss {loss.item():.6f}")
    print(f"{501 / (time.perf_counter() - start):.0f} training steps per second")


def replay():
    print("\n# the same kind of loop, recorded once and replayed compiled: Lotka-Volterra")
    params = [tg.tensor(v, requires_grad=True) for v in (1.5, 1.0, 3.0, 1.0)]

    @tg.compile
    def ode_loss(a, b, c, d):
        u, v = tg.tensor(1.0), tg.tensor(1.0)
        for _ in range(1000):        # 1000 explicit Euler steps, 11 scalar ops each
            uv = u * v
            u, v = u + 0.01 * (a * u - b * uv), v + 0.01 * (d * uv - c * v)
        return (u - 1.5) ** 2 + (v - 0.5) ** 2

    for call in range(1, 7):
        for p in params:
            p.grad = None
        before = ode_loss.stats.as_dict()
        start = time.perf_counter()
        loss = ode_loss(*params)
        loss.backward()
        took = time.perf_counter() - start
        after = ode_loss.stats.as_dict()
        if after["records"] > before["records"]:
            what = "records the tape"
        elif after["generated"] > before["generated"]:
            what = "generates code for it"
        elif after["generated"]:
            what = "replays generated code"
        else:
            what = "replays, interpreted"
        print(f"call {call}  {what:24s} {took * 1e3:9.3f} ms   loss {loss.item():.6f}  "
              f"dL/da {params[0].grad.item():.6f}")
    print(ode_loss.stats)


if __name__ == "__main__":
    seed_example()
    train()
    replay()
