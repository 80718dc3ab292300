"""README's Python examples run as written (issue 53): each ```python block,
in order, in the repository's root (where its example specs lie), on the CPU."""

import os
import re

import twobs

from conftest import ROOT


def test_every_python_block_of_the_readme_runs_as_written(monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert blocks, "README.md has Python examples"
    monkeypatch.chdir(ROOT)
    # The machine running the suite may have no GPU: the default session is the CPU's there anyway.
    monkeypatch.setattr(twobs._session, "_default", twobs.Session(backend="cpu"))
    scope: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), scope)
    assert "rdf" in scope and scope["rdf"].frames == 3


def test_every_docstring_example_runs(monkeypatch):
    import doctest

    monkeypatch.setattr(twobs._session, "_default", twobs.Session(backend="cpu"))
    failures = 0
    for module in (twobs._session, twobs._gofr, twobs._corrfunc, twobs._neighbours):
        failures += doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed
    assert failures == 0
