"""L-BFGS with PyTorch's algorithm: the same two-loop recursion, stopping rules and optional
strong-Wolfe line search (cubic interpolation, bracketing then zoom), step by step, so that
its iterates follow ``torch.optim.LBFGS``'s.

The work is on flat float64 NumPy vectors (the parameters concatenated, in order); the
closure is called as in PyTorch, with grad mode on, and its gradients read from ``.grad``.
"""
import numpy as np

import tapegrad as tg

from ..autograd import enable_grad, no_grad
from .optimizer import Optimizer, _check_lr, _flat

__all__ = ["LBFGS"]


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clamped to
    ``bounds`` (default: the interval between the points); their midpoint when the cubic
    has no minimum."""
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = float(np.sqrt(d2_square))
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A step length along ``d`` meeting the strong Wolfe conditions, from the trial ``t``.

    ``evaluate(t)`` returns (loss, flat gradient) at ``x + t * d``.  Returns
    (loss, gradient, t, evaluations) at the step chosen."""
    d_norm = float(np.max(np.abs(d)))
    g = g.copy()
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = float(g_new.dot(d))

    # bracket an interval holding a point that meets the conditions
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        # extrapolate
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        previous = t
        t = _cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                           bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = previous, f_new, g_new.copy(), gtd_new
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # zoom: shrink the bracket until a point meets the conditions
    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimum(bracket[0], bracket_f[0], bracket_gtd[0],
                           bracket[1], bracket_f[1], bracket_gtd[1])
        # a trial too close to an end of the bracket moves to 10% of its width inside,
        # when the last trial was also too close or this one is at (or beyond) the end
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insufficient_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            # no sufficient decrease, or not below the low end: the new high end
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new.copy(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                # the old low end becomes the high end
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new.copy(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


def _tensor(vector):
    return tg.from_numpy(np.array(vector))


class LBFGS(Optimizer):
    """L-BFGS (Nocedal), in the form of ``torch.optim.LBFGS`` (after minFunc).

    ``step(closure)`` runs up to ``max_iter`` iterations (and ``max_eval`` closure calls):
    the direction from the last ``history_size`` curvature pairs, then a step of ``lr``
    (the first one scaled by ``min(1, 1 / |g|_1)``) or, with ``line_search_fn=
    "strong_wolfe"``, a step length from a strong-Wolfe line search.  One parameter group
    only; its state is kept under the first parameter, as in PyTorch.

    ``step`` takes a closure that recomputes the loss; on Rosenbrock's function:

    Example:
        >>> w = tg.tensor([1.5, -0.5], requires_grad=True)
        >>> opt = tg.optim.LBFGS([w], max_iter=50, line_search_fn="strong_wolfe")
        >>> def closure():
        ...     opt.zero_grad()
        ...     loss = (1 - w[0]) ** 2 + 100 * (w[1] - w[0] ** 2) ** 2
        ...     loss.backward()
        ...     return loss
        >>> for _ in range(3):
        ...     _ = opt.step(closure)
        >>> w.detach(), closure().item() < 1e-8
        (tensor([1.0000, 1.0000]), True)
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        _check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                    "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                    "history_size": history_size, "line_search_fn": line_search_fn}
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self):
        """The parameters' gradients concatenated (zeros where ``.grad`` is None)."""
        return np.concatenate([
            np.zeros(p._value.size) if p.grad is None else
            np.asarray(p.grad._value, dtype=np.float64).reshape(-1) for p in self._params])

    def _params_flat(self):
        return np.concatenate([p._value.reshape(-1) for p in self._params])

    def _add_to_params(self, step_size, update):
        """``p += step_size * update`` for each parameter's slice of the flat ``update``."""
        offset = 0
        for p in self._params:
            v = _flat(p)
            v += step_size * update[offset:offset + v.size]
            p._bump_version()
            offset += v.size

    def _set_params(self, flat):
        offset = 0
        for p in self._params:
            v = _flat(p)
            v[:] = flat[offset:offset + v.size]
            p._bump_version()
            offset += v.size

    def step(self, closure):
        """Minimise with up to ``max_iter`` iterations; returns the closure's first loss.

        ``closure`` re-evaluates the model, calls ``backward()`` and returns the loss."""
        with no_grad():
            return self._step(closure)

    def _evaluate(self, closure):
        with enable_grad():
            loss = closure()
        return loss

    def _step(self, closure):
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        # the optimizer's state is global; PyTorch files it under the first parameter
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = self._evaluate(closure)
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.max(np.abs(flat_grad)) <= tolerance_grad:
            return orig_loss

        d = _array(state.get("d"))
        t = state.get("t")
        old_dirs = [_array(v) for v in state.get("old_dirs", [])]
        old_stps = [_array(v) for v in state.get("old_stps", [])]
        ro = list(state.get("ro", []))
        h_diag = state.get("H_diag")
        prev_flat_grad = _array(state.get("prev_flat_grad"))
        prev_loss = state.get("prev_loss")
        al = [None] * history_size
        opt_cond = False

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # the direction
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                h_diag = 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y.dot(s))
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y.dot(y))
                # the two-loop recursion: q = -H g, with H the inverse Hessian estimate
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = float(old_stps[i].dot(q)) * ro[i]
                    q += (-al[i]) * old_dirs[i]
                d = r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = float(old_dirs[i].dot(r)) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss

            # the step length
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(np.sum(np.abs(flat_grad)))) * lr
            else:
                t = lr
            gtd = float(flat_grad.dot(d))
            if gtd > -tolerance_change:
                break   # not a descent direction any more

            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x_init = self._params_flat()

                def evaluate(step_length):
                    self._add_to_params(step_length, d)
                    f = float(self._evaluate(closure))
                    g = self._flat_grad()
                    self._set_params(x_init)
                    return f, g

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    evaluate, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_to_params(t, d)
                opt_cond = np.max(np.abs(flat_grad)) <= tolerance_grad
            else:
                self._add_to_params(t, d)
                if n_iter != max_iter:
                    # no new evaluation after the last iteration: in a stochastic setting
                    # it would be wasted
                    loss = float(self._evaluate(closure))
                    flat_grad = self._flat_grad()
                    opt_cond = np.max(np.abs(flat_grad)) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            # stopping rules
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.max(np.abs(d * t)) <= tolerance_change:
                break   # no progress in the parameters
            if abs(loss - prev_loss) < tolerance_change:
                break   # no progress in the loss

        state["d"] = _tensor(d)
        state["t"] = t
        state["old_dirs"] = [_tensor(v) for v in old_dirs]
        state["old_stps"] = [_tensor(v) for v in old_stps]
        state["ro"] = ro
        state["H_diag"] = h_diag
        state["prev_flat_grad"] = _tensor(prev_flat_grad)
        state["prev_loss"] = prev_loss
        state["al"] = al
        return orig_loss


def _array(value):
    """A state vector as a NumPy array (None stays None)."""
    if value is None:
        return None
    return np.array(value._value if isinstance(value, tg.Tensor) else value, dtype=np.float64)
