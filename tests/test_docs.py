"""Every Python block in README.md and docs/*.md runs as written.

A block is self-contained (its own imports). A block written as an interactive session (``>>>``)
is run as a doctest, so what it shows is checked too; other blocks are run as scripts. The
README's tour is also checked claim by claim in ``test_examples.py``.
"""

import doctest
import linecache
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks() -> list[tuple[str, str]]:
    """``(where, code)`` for every fenced Python block, ``where`` as ``file:line``."""
    blocks = []
    for path in DOCUMENTS:
        text = path.read_text()
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 2
            blocks.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return blocks


BLOCKS = python_blocks()


def test_blocks_are_found():
    assert len(BLOCKS) >= 8  # guards against a pattern that silently matches nothing


@pytest.mark.parametrize("where, code", BLOCKS, ids=[where for where, _ in BLOCKS])
def test_block_runs_as_written(where, code):
    if code.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(code, {}, where, where, 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        runner.run(test)
        assert runner.failures == 0, f"{where}: {runner.failures} example(s) failed"
    else:
        # The source is known, as for code in a file or a notebook cell (autograph=True reads it).
        linecache.cache[where] = (len(code), None, code.splitlines(True), where)
        exec(compile(code, where, "exec"), {"__name__": "__docs__"})
