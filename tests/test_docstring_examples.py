"""The examples in the public docstrings run and print what they say (doctest), for the
modules whose docstrings carry examples.  Each sees its module's names and ``tg`` (``import tapegrad as tg``), ``nn``, ``F``
(``tapegrad.nn.functional``) and ``np``."""
import doctest
import importlib

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import nn
from tapegrad.nn import functional as F

MODULES = ["tapegrad.creation", "tapegrad.transforms", "tapegrad.higher", "tapegrad.tapefile",
           "tapegrad.nn.functional", "tapegrad.nn.init", "tapegrad.nn.modules",
           "tapegrad.optim.optimizer", "tapegrad.optim.sgd", "tapegrad.optim.adam",
           "tapegrad.testing", "tapegrad.viz", "tapegrad.backends.cudnn",
           "tapegrad.backends.cuda", "tapegrad.backends.mps", "tapegrad.backends.mkldnn",
           "tapegrad.backends.mkl", "tapegrad.backends.openmp", "tapegrad.backends.opt_einsum", "tapegrad.utils.checkpoint", "tapegrad._blas", "tapegrad._dtype",
           "tapegrad.replay", "tapegrad.function", "tapegrad.functional", "tapegrad.comparison",
           "tapegrad.autograd", "tapegrad._generator", "tapegrad._device", "tapegrad.tensor",
           "tapegrad.serialization", "tapegrad.func", "tapegrad.nn.containers",
           "tapegrad.nn.utils", "tapegrad.nn.parametrize", "tapegrad.nn.parametrizations",
           "tapegrad.nn.rnn_utils", "tapegrad.nn.prune",
           "tapegrad.optim.rmsprop", "tapegrad.optim.lbfgs",
           "tapegrad.optim.rprop",
           "tapegrad.optim.lr_scheduler", "tapegrad.optim.swa_utils", "tapegrad.utils.data",
           "tapegrad.cuda",
           "tapegrad._autograd_functional", "tapegrad.distributed", "tapegrad.sparsity",
           "tapegrad.compressed", "tapegrad.colouring", "tapegrad.optimize",
           "tapegrad.derived", "tapegrad.nn.activation", "tapegrad.nn.conv",
           "tapegrad.nn.layers", "tapegrad.nn.loss", "tapegrad.nn.normalization",
           "tapegrad.nn.rnn", "tapegrad.nn.transformer", "tapegrad.special", "tapegrad.linalg",
           "tapegrad.more_ops", "tapegrad.toplevel", "tapegrad._anomaly", "tapegrad._format",
           "tapegrad.distributions",
           "tapegrad.distributions.distribution", "tapegrad.distributions.constraints",
           "tapegrad.distributions._univariate", "tapegrad.distributions._multivariate",
           "tapegrad.distributions.kl", "tapegrad.distributions._gamma",
           "tapegrad.distributions._transformed", "tapegrad.distributions._ops",
           "tapegrad.distributions._composite", "tapegrad.distributions._by_icdf",
           "tapegrad.distributions._von_mises",
           "tapegrad.distributions.transforms", "tapegrad.distributions.constraint_registry",
           "tapegrad.settings", "tapegrad.random",
           "tapegrad.version", "tapegrad.nn.parameter", "tapegrad._gradcheck", "tapegrad.legacy",
           "tapegrad.nn.grid_sampling", "tapegrad.jit",
           "tapegrad.amp.autocast_mode", "tapegrad.amp.grad_scaler", "tapegrad.cuda.amp",
           "tapegrad.cpu", "tapegrad.cpu.amp", "tapegrad.nn.lazy", "tapegrad.nn.ctc",
           "tapegrad.nn.adaptive", "tapegrad.nn.parallel",
           "tapegrad.strided_views", "tapegrad.histograms", "tapegrad.nn.margin_losses",
           "tapegrad.nn.fractional_pool"]
GLOBALS = {"tg": tg, "np": np, "nn": nn, "F": F, "math": __import__("math")}
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    tests = [t for t in finder.find(module, name, globs={**vars(module), **GLOBALS}) if t.examples]
    for test in tests:
        runner.run(test)
    failed, attempted = runner.summarize(verbose=False)
    assert attempted > 0, f"no docstring examples in {name}"
    assert failed == 0, f"{failed} of {attempted} docstring examples failed in {name}"
