"""The Python examples of the documentation site (docs/*.md) run as written.

Each page's ```python blocks run in order in one namespace, as a reader would paste them."""
import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md") if p.name != "README.md")
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


def test_the_pages_have_examples():
    assert sum(len(BLOCK.findall(p.read_text())) for p in PAGES) >= 15


@pytest.mark.parametrize("page", [p for p in PAGES if BLOCK.search(p.read_text())],
                         ids=lambda p: p.stem)
def test_examples_run(page):
    namespace = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for k, code in enumerate(BLOCK.findall(page.read_text())):
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, f"{page.name}, example {k + 1}", "exec"), namespace)
