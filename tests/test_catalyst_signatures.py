"""Our public functions accept Catalyst 0.15's parameters, name by name, in the same order and of
the same kind (so ``for_loop(lower_bound=...)``, ``switch(index_var=...)`` work and ``help()``
shows Catalyst's names). Catalyst's signatures are read in a subprocess (importing it here would
change JAX's state for the rest of the suite); skipped where pennylane-catalyst is not installed."""

import importlib.util
import inspect
import json
import subprocess
import sys

import pytest

import catalyst_lite
from catalyst_lite import debug, passes
from catalyst_lite.api_extensions import callbacks

MODULES = {"catalyst": catalyst_lite, "catalyst.debug": debug, "catalyst.passes": passes,
           "catalyst.api_extensions.callbacks": callbacks}

READ_SIGNATURES = """
import inspect, json, sys, importlib
out = {}
for module_name, names in json.loads(sys.argv[1]).items():
    module = importlib.import_module(module_name)
    for name in names:
        obj = getattr(module, name, None)
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError):
            continue
        out[f"{module_name}.{name}"] = [(p.name, p.kind.name, p.default is p.empty) for p in sig.parameters.values()]
print(json.dumps(out))
"""


def _public(module) -> list[str]:
    return [n for n in getattr(module, "__all__", []) if callable(getattr(module, n, None))]


@pytest.fixture(scope="module")
def catalyst_signatures():
    if importlib.util.find_spec("catalyst") is None:
        pytest.skip("pennylane-catalyst is not installed")
    names = {m: _public(ours) for m, ours in MODULES.items()}
    run = subprocess.run([sys.executable, "-c", READ_SIGNATURES, json.dumps(names)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


CASES = [(m, n) for m, ours in MODULES.items() for n in _public(ours)]


@pytest.mark.parametrize("module, name", CASES, ids=[f"{m}.{n}" for m, n in CASES])
def test_signature_has_catalysts_parameters(catalyst_signatures, module, name):
    theirs = catalyst_signatures.get(f"{module}.{name}")
    if theirs is None:
        pytest.skip(f"{module}.{name}: not in Catalyst or no signature there")
    ours = {p.name: p for p in inspect.signature(getattr(MODULES[module], name)).parameters.values()}
    missing = [n for n, _, _ in theirs if n not in ours and not any(
        p.kind is p.VAR_KEYWORD for p in ours.values())]
    assert not missing, f"{module}.{name} lacks Catalyst's parameter(s) {missing}"
    for position, (pname, kind, required) in enumerate(theirs):
        if pname not in ours:
            continue
        assert ours[pname].kind.name == kind, f"{module}.{name}({pname}): {ours[pname].kind.name}, Catalyst {kind}"
        if kind in ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"):
            assert list(ours).index(pname) == position, f"{module}.{name}: {pname} is not at position {position}"
        if not required:
            assert ours[pname].default is not inspect.Parameter.empty, f"{module}.{name}({pname}) needs a default"
    # What we add is optional: a call written for Catalyst never has to pass it.
    extra = [p for n, p in ours.items() if n not in {t[0] for t in theirs}]
    assert all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in extra)


def test_every_public_name_of_catalyst_is_here(catalyst_signatures):
    """The names compared above are all of Catalyst's (but the MLIR-only ones this lists)."""
    assert {"catalyst.for_loop", "catalyst.switch", "catalyst.qjit", "catalyst.passes.Pass",
            "catalyst.passes.ppm_specs"} <= set(catalyst_signatures)


def test_catalysts_keyword_names_work():
    import jax.numpy as jnp

    from catalyst_lite import for_loop, qjit, switch

    @qjit
    def f(n: int):
        @for_loop(lower_bound=0, upper_bound=n, step=1)
        def body(i, acc):
            return acc + i

        @switch(index_var=n % 2)
        def parity():
            return 0

        @parity.branch(1)
        def _():
            return 1

        return body(jnp.int64(0)), parity()

    assert [int(v) for v in f(5)] == [10, 1]
    assert list(inspect.signature(for_loop).parameters)[:3] == ["lower_bound", "upper_bound", "step"]
    assert "in_shardings" in inspect.signature(qjit).parameters
