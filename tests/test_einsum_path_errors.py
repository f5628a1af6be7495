"""einsum's argument errors for three or more operands are PyTorch's: where the optional
opt_einsum package is installed and enabled, PyTorch asks it for a contraction path first and
raises its ValueError; otherwise (or with ``backends.opt_einsum.enabled = False``) its own
RuntimeError.  Compared with PyTorch in both settings, and the switch restored."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

X = np.ones((3, 5))
Y = np.ones((5, 3))
CASES = [("ij,jk,kl", "XXY"), ("ij,jk", "XX"), ("ij,jk,k", "XYX"), ("ijk,jk,kl", "XYX"),
         ("ij,jk,kl->m", "XYX"), ("ii,ij,jk", "XYX"), ("ij,jk,kl", "XYX")]


def _outcome(m, equation, names):
    try:
        out = m.einsum(equation, *[m.tensor(X if n == "X" else Y) for n in names])
    except Exception as e:   # noqa: BLE001 - the error is compared
        return type(e).__name__, str(e)
    return "ok", out.tolist()


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("equation,names", CASES)
def test_errors_as_pytorch(equation, names, enabled):
    assert tg.backends.opt_einsum.is_available() == torch.backends.opt_einsum.is_available()
    if enabled and not torch.backends.opt_einsum.is_available():
        enabled = None      # not installed: both run their own checks only
    saved = (torch.backends.opt_einsum.enabled, tg.backends.opt_einsum.enabled)
    try:
        if enabled is not None:
            torch.backends.opt_einsum.enabled = enabled
            tg.backends.opt_einsum.enabled = enabled
        assert _outcome(tg, equation, names) == _outcome(torch, equation, names)
    finally:
        torch.backends.opt_einsum.enabled, tg.backends.opt_einsum.enabled = saved
