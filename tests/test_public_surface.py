"""What a user sees of the package: ``help(tapegrad)``, ``dir()`` and tab completion list the
public functions and classes, not the internal modules or the imports of a module."""
import importlib
import pydoc
import types

import pytest

import tapegrad as tg

PUBLIC_MODULES = ["tapegrad", "tapegrad.autograd", "tapegrad.nn", "tapegrad.nn.functional",
                  "tapegrad.nn.init", "tapegrad.nn.utils", "tapegrad.nn.utils.parametrize",
                  "tapegrad.nn.utils.parametrizations", "tapegrad.nn.utils.rnn",
                  "tapegrad.nn.utils.prune",
                  "tapegrad.optim",
                  "tapegrad.optim.lr_scheduler", "tapegrad.optim.swa_utils", "tapegrad.utils",
                  "tapegrad.utils.data",
                  "tapegrad.func", "tapegrad.cuda", "tapegrad.viz", "tapegrad.testing",
                  "tapegrad.distributed", "tapegrad.optimize", "tapegrad.colouring",
                  "tapegrad.special", "tapegrad.linalg", "tapegrad.backends",
                  "tapegrad.backends.cudnn", "tapegrad.backends.cuda",
                  "tapegrad.utils.checkpoint", "tapegrad.distributions",
                  "tapegrad.distributions.constraints", "tapegrad.distributions.transforms",
                  "tapegrad.distributions.constraint_registry", "tapegrad.random",
                  "tapegrad.nn.parameter", "tapegrad.autograd.gradcheck", "tapegrad.jit",
                  "tapegrad.amp", "tapegrad.amp.autocast_mode", "tapegrad.amp.grad_scaler",
                  "tapegrad.cuda.amp", "tapegrad.cpu", "tapegrad.cpu.amp", "tapegrad.nn.lazy",
                  "tapegrad.nn.parallel"]
INTERNAL = {"replay", "ops", "tape", "higher", "inplace", "creation", "functional", "tapefile",
            "views", "pystate", "codegen", "transforms", "serialization", "function",
            "sparsity", "compressed", "derived",
            "comparison", "np", "numpy", "threading", "functools", "math", "sys"}


def test_help_lists_the_functions_and_classes():
    text = pydoc.render_doc(tg, renderer=pydoc.plaintext)
    functions = text[text.index("\nFUNCTIONS\n"):]
    for name in ("tensor", "compile", "hessian", "jacobian", "vmap", "matmul"):
        assert f"\n    {name}(" in functions, name
    classes = text[text.index("\nCLASSES\n"):text.index("\nFUNCTIONS\n")]
    for name in ("Tensor", "Generator", "no_grad"):
        assert f"class {name}" in classes, name


def test_dir_of_the_package_is_its_public_surface():
    shown = dir(tg)
    assert not INTERNAL & set(shown), INTERNAL & set(shown)
    for name in ("tensor", "compile", "Tensor", "float64", "nn", "optim", "autograd", "func"):
        assert name in shown
    # the internal modules stay importable by name
    assert isinstance(tg.replay, types.ModuleType)
    star = {}
    exec("from tapegrad import *", star)
    assert {"tensor", "compile", "Tensor", "hessian"} <= set(star)
    assert not INTERNAL & set(star)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_a_public_module_shows_its_names_not_its_imports(name):
    module = importlib.import_module(name)
    shown = dir(module)
    assert shown == sorted(shown) and shown
    for attr in shown:
        getattr(module, attr)          # every name offered exists
    imports = {"np", "numpy", "threading", "functools", "math", "warnings", "weakref", "tg",
               "OrderedDict", "state"}
    if name != "tapegrad":
        imports.add("Tensor")           # documented at the top level, imported elsewhere
    assert not imports & set(shown), imports & set(shown)
    assert set(module.__all__) <= set(shown)
