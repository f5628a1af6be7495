"""Sphinx configuration of tapegrad's documentation site.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (warnings are
errors).  Pages are Markdown (MyST); the notebooks are rendered from their saved outputs,
never executed here; the API reference is generated from the package's public names
(``_ext/public_api.py``).
"""
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT / "src"))      # the tapegrad of this checkout, installed or not
sys.path.insert(0, str(DOCS / "_ext"))

import tapegrad  # noqa: E402

project = "tapegrad"
author = "the tapegrad authors"
copyright = "the tapegrad authors"  # noqa: A001 - Sphinx's name
release = version = tapegrad.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "myst_nb",
    "public_api",
]

# Markdown pages and the notebooks (copied in below); myst-nb reads both.
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "README.md", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "off"         # render the saved outputs of the notebooks' full run
nb_merge_streams = True

autosummary_generate = True
autosummary_ignore_module_all = False
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "groupwise"
autodoc_typehints = "none"
napoleon_google_docstring = True
napoleon_numpy_docstring = True
add_module_names = False

html_theme = "furo"
html_title = f"tapegrad {release}"
html_static_path = ["_static"]
html_favicon = "_static/tapegrad.svg"     # else every page asks for a missing /favicon.ico
html_theme_options = {"navigation_with_keys": True}
html_show_sourcelink = False


def _copy_notebooks(app, config):
    """The notebooks live in the repository's notebooks/; Sphinx reads only under docs/."""
    target = DOCS / "notebooks"
    target.mkdir(exist_ok=True)
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        copy = target / notebook.name
        if not copy.exists() or copy.read_bytes() != notebook.read_bytes():
            shutil.copyfile(notebook, copy)


def setup(app):
    app.connect("config-inited", _copy_notebooks)   # before Sphinx lists its sources
