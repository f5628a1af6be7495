"""Writes the API reference's source (``api/index.rst``) from tapegrad's public names.

A module's public names are its ``__all__`` where it has one.  Where it does not yet, they are
the names that do not start with an underscore and name a function, class or dtype defined in
tapegrad (not a module, nor something imported from NumPy or the standard library); for the
top-level package that is every such name, re-exports included.  So a function added to the
package appears in the reference without a change here.  Each name gets its own page
(autosummary's ``:toctree:``), and the index lists them all with their one-line summaries.
"""
import importlib
import inspect
import types
from pathlib import Path

# The modules a user imports, in the order the reference shows them.
MODULES = [
    ("tapegrad", "Tensors, their ops, grad mode, compile and the transforms"),
    ("tapegrad.autograd", "Gradients of outputs with respect to chosen inputs"),
    ("tapegrad.nn", "Layers, losses and the Module base class"),
    ("tapegrad.nn.functional", "Activations and losses as functions"),
    ("tapegrad.nn.init", "Parameter initialisation"),
    ("tapegrad.nn.utils", "Gradient clipping and parameter vectors"),
    ("tapegrad.optim", "Optimizers"),
    ("tapegrad.optim.lr_scheduler", "Learning-rate schedules"),
    ("tapegrad.func", "Function transforms: grad, vjp, jvp, jacobians, hessian, vmap"),
    ("tapegrad.autograd.functional", "Jacobians, Hessians and their products of a function"),
    ("tapegrad.autograd.gradcheck", "Gradients checked against central differences, as "
                                    "PyTorch's gradcheck checks them"),
    ("tapegrad.utils.data", "Datasets, samplers and the DataLoader"),
    ("tapegrad.distributed", "Many gradients on a Dask cluster"),
    ("tapegrad.distributions", "Probability distributions: sampling, log densities and KL "
                               "divergences"),
    ("tapegrad.distributions.transforms", "Transforms of random variables (exp, affine, "
                                          "sigmoid, stick breaking, ...), for "
                                          "TransformedDistribution and biject_to"),
    ("tapegrad.cuda", "What a program asks before choosing a device"),
    ("tapegrad.jit", "PyTorch's jit names, running eagerly (tapegrad.compile is the compiled "
                     "path)"),
    ("tapegrad.amp", "Mixed precision: autocast (no value changes in float64) and "
                     "GradScaler"),
    ("tapegrad.random", "The random generator's seed and state, and fork_rng"),
    ("tapegrad.testing", "Gradient checks and hypothesis strategies for your own functions"),
    ("tapegrad.optimize", "SciPy's optimisers, root finders and stiff integrators with "
                          "compiled derivatives"),
    ("tapegrad.colouring", "Colourings that compress sparse Jacobians and Hessians"),
    ("tapegrad.viz", "Drawing the recorded graph"),
]


def _defined_in_tapegrad(obj):
    home = getattr(obj, "__module__", None) or ""
    return home == "tapegrad" or home.startswith("tapegrad.")


def public_names(module_name):
    """The public names of a module, sorted (see the module docstring for the rule)."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = []
        for name, obj in vars(module).items():
            if name.startswith("_") or isinstance(obj, types.ModuleType):
                continue
            if module_name != "tapegrad" and getattr(obj, "__module__", None) != module_name:
                continue      # imported here from another module, documented there
            if _defined_in_tapegrad(obj) or _defined_in_tapegrad(type(obj)):
                names.append(name)
    # submodules listed in __all__ (tapegrad.nn's functional, init) have sections of their own
    names = [n for n in names if not isinstance(getattr(module, n), types.ModuleType)]
    if module_name != "tapegrad":
        # autodoc files a class under the module that defines it, so a class re-exported at
        # the top level (tapegrad.random.Generator is tapegrad.Generator) would be described
        # twice; it is documented once, in the top-level section
        top = importlib.import_module("tapegrad")
        names = [n for n in names if not (inspect.isclass(getattr(module, n))
                                          and getattr(top, n, None) is getattr(module, n))]
        # likewise a class re-exported from another module with a section of its own
        # (tapegrad.distributions re-exports tapegrad.distributions.transforms' classes, as
        # PyTorch's package does) is documented there only
        sections = {m for m, _ in MODULES} - {module_name}
        names = [n for n in names if not (inspect.isclass(getattr(module, n))
                                          and getattr(module, n).__module__ in sections)]
    return sorted(names, key=lambda n: (n.lower(), n))


def _kind(obj):
    if inspect.isclass(obj):
        return "Classes"
    if callable(obj):
        return "Functions"
    return "Data types and constants"


def _autosummary(names):
    lines = ["", ".. autosummary::", "   :toctree: generated", "   :nosignatures:", ""]
    return lines + [f"   {name}" for name in names] + [""]


def index_source():
    lines = [
        "API reference",
        "=============",
        "",
        "Every public name of tapegrad's modules, generated from the package itself: a",
        "function added to the package appears here on the next build.  Each name links to its",
        "own page with the full docstring.  The search box (top left) finds any of them.",
        "",
    ]
    for module_name, summary in MODULES:
        module = importlib.import_module(module_name)
        groups = {}
        for name in public_names(module_name):
            groups.setdefault(_kind(getattr(module, name)), []).append(name)
        title = f"``{module_name}``"
        lines += [title, "-" * len(title), "", summary + ".", "",
                  f".. currentmodule:: {module_name}", ""]
        for kind in ("Functions", "Classes", "Data types and constants"):
            if kind in groups:
                lines += [f".. rubric:: {kind}"] + _autosummary(groups[kind])
    return "\n".join(lines) + "\n"


def write(app, config=None):
    target = Path(app.srcdir) / "api" / "index.rst"
    target.parent.mkdir(exist_ok=True)
    text = index_source()
    if not target.exists() or target.read_text() != text:   # unchanged: no rebuild
        target.write_text(text)


def setup(app):
    # before Sphinx lists its source files, so that autosummary finds the page and generates
    # each name's stub from it
    app.connect("config-inited", write)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
