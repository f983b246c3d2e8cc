"""The examples in examples/ run to the end and check their own results against NumPy."""

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"

# What each example must print besides running cleanly.
EXPECTED_OUTPUT = {
    "design_documents.py": [
        "all design-document examples ran and matched",
        "{ lambda ; a:i64[]. let",  # the jaxprs are printed
        "for_loop[",
    ],
}


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_example_runs(script):
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "MISMATCH" not in proc.stdout
    for text in EXPECTED_OUTPUT.get(script, []):
        assert text in proc.stdout


def test_main_example_exists():
    assert (EXAMPLES / "design_documents.py").is_file()


def test_readme_tour_runs():
    """The README's tour is real code: run it, and check what its comments claim."""
    import re

    import numpy as np

    readme = (EXAMPLES.parent / "README.md").read_text()
    block = re.search(r"## A short tour\n\n```python\n(.*?)```", readme, re.S).group(1)
    namespace: dict = {}
    exec(compile(block, "README.md tour", "exec"), namespace)
    np.testing.assert_allclose(namespace["ramp"](3), np.arange(3) * 2.0 + 1.0)
    with pytest.raises(ValueError, match="'n'.*'x'.*'y'"):
        namespace["scale"](np.ones(3), np.ones(4))
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(namespace["matmul"](a, b), a @ b)
    np.testing.assert_allclose(namespace["circuit"](4), np.full(4, 12.0))
