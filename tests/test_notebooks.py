"""The notebooks in notebooks/ run top to bottom without a cell error.

Each is executed with nbclient in a kernel running this interpreter, with the tapegrad these
tests import and ``TAPEGRAD_NB_SMALL=1`` (the notebooks' tiny sizes: the three together take
well under two minutes). The executed copies are not saved: the committed notebooks keep the
outputs of their full-size run. Peers that are not installed (PyTorch, JAX, HIPS autograd,
micrograd) are skipped inside the notebooks with a printed note.
"""
import os
import sys
import time
from pathlib import Path

import pytest

import tapegrad

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT = 300      # seconds for any one cell
KERNEL = "tapegrad-tests"


def test_the_notebooks_are_there():
    assert [p.name for p in NOTEBOOKS] == [
        "01_tour_of_the_seed.ipynb", "02_eager_speedups.ipynb", "03_replay.ipynb",
        "04_sparse_derivatives.ipynb", "05_custom_ops.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_with_outputs_of_a_full_run(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count is not None for c in code), "not executed"
    outputs = [o for c in code for o in c.outputs]
    assert outputs, "saved without outputs"
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert "SMALL sizes (test run)" not in text, "saved from a TAPEGRAD_NB_SMALL=1 run"


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """A kernelspec that starts this interpreter with the tapegrad imported here."""
    from ipykernel.kernelspec import write_kernel_spec

    path = [str(Path(tapegrad.__file__).resolve().parents[1])]
    if os.environ.get("PYTHONPATH"):
        path.append(os.environ["PYTHONPATH"])
    write_kernel_spec(tmp_path / "kernels" / KERNEL, overrides={
        "display_name": "tapegrad tests",
        "env": {"TAPEGRAD_NB_SMALL": "1", "PYTHONPATH": os.pathsep.join(path)},
    })
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")   # silences jupyter_core's migration notice
    return KERNEL


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, kernel):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name=kernel, timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    start = time.perf_counter()
    client.execute()      # raises CellExecutionError, with the cell and traceback, on an error
    elapsed = time.perf_counter() - start
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.outputs)
    assert "SMALL sizes (test run)" in text, "the kernel did not see TAPEGRAD_NB_SMALL=1"
    print(f"{path.name}: {elapsed:.1f} s", file=sys.stderr)
