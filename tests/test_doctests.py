"""The examples in catalyst_lite's docstrings are run, so that they stay true."""

import doctest
import importlib
import pkgutil
import re

import jax
import pytest

import catalyst_lite

MODULES = sorted(
    [catalyst_lite.__name__]
    + [m.name for m in pkgutil.walk_packages(catalyst_lite.__path__, catalyst_lite.__name__ + ".")]
)


def test_every_subpackage_is_found():
    assert {"catalyst_lite.compiled", "catalyst_lite.signature", "catalyst_lite.tracing"} <= set(
        MODULES
    )


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    before = (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed in {name}"
    assert (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64) == before


def test_examples_are_found():
    """Guards against a finder that silently sees nothing (the test above would then pass)."""
    module = importlib.import_module("catalyst_lite.compiled")
    examples = sum(len(t.examples) for t in doctest.DocTestFinder().find(module))
    assert examples >= 3


SUBPACKAGES = sorted(
    m.name for m in pkgutil.iter_modules(catalyst_lite.__path__, catalyst_lite.__name__ + ".") if m.ispkg
)


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_each_subpackage_docstring_lists_its_modules(name):
    """A subpackage's docstring is its module map: it names every module in it, and no other."""
    package = importlib.import_module(name)
    modules = {m.name for m in pkgutil.iter_modules(package.__path__)}
    named = set(re.findall(r":mod:`\.(\w+)`", package.__doc__ or ""))
    assert named == modules


def _public_api() -> dict[str, object]:
    """catalyst_lite's public functions and classes (but exceptions), ``debug``'s and ``passes``'
    (those defined here: ``passes``' PennyLane transforms carry PennyLane's docstrings)."""
    from catalyst_lite import debug, passes

    found = {}
    for module in (catalyst_lite, debug, passes):
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and not (isinstance(obj, type) and issubclass(obj, BaseException)) and \
                    getattr(obj, "__module__", "").startswith("catalyst_lite"):
                found[f"{module.__name__}.{name}"] = obj
    return found


PUBLIC = _public_api()


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_example_runs_as_pasted(name):
    """Every public function has an example, and it runs in an empty namespace (its own imports,
    no module globals), as a user pasting it would."""
    obj = PUBLIC[name]
    tests = doctest.DocTestFinder(recurse=isinstance(obj, type)).find(obj, name, globs={})
    assert sum(len(t.examples) for t in tests) > 0, f"{name} has no docstring example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in tests:
        runner.run(test)
    assert runner.failures == 0, f"{runner.failures} example(s) of {name} failed as pasted"
