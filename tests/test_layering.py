"""The package's layering, checked on its source: layers whose imports only point down, no import
cycles (counting the imports inside functions and those for type checking alone), imports inside
functions only of the modules that import PennyLane (which only programs that use it pay for), the
compiler independent of the quantum extension, JAX's internals imported in ``jax_extras`` only,
and no mid-module imports."""

import ast
import functools
import pathlib

import pytest

import catalyst_lite

ROOT = pathlib.Path(catalyst_lite.__file__).parent

# Lowest first. A module imports modules of its own layer or of lower ones (top-level names: the
# module or package under ``catalyst_lite``).
LAYERS = (
    {"errors", "trace_context"},  # what everything reads
    {"jax_extras"},  # the seam with JAX's internals
    # the representation of a traced program and what describes it: tracing, signatures, facts
    {"tracing", "signature", "binding", "annotations", "diagnostics", "reporting", "settings",
     "compile_options", "passes", "compiler_stages", "jit_options", "stages", "tracebacks", "versions"},
    {"compiler"},  # the runtime: specialization, executables, strategies, caches
    # the user API's parts: primitives and their rules, transformations, the frontends
    {"callbacks", "debug", "control_flow", "quantum", "transforms", "autograph", "capture"},
    {"compiled", "pennylane_compiler", ""},  # qjit itself, and the package
)


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    modules = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return modules


MODULES = _modules()


def _target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")[: len(module.split(".")) - (node.level - 1) - (0 if is_package else 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str, nodes) -> set[str]:
    """The catalyst_lite modules these import statements import."""
    path, is_package = MODULES[module]
    out = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            target = _target(module, is_package, node)
            for alias in node.names:
                name = f"{target}.{alias.name}"
                if name in MODULES:
                    out.add(name)
                elif target in MODULES:
                    out.add(target)
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name in MODULES)
    return out


def _tree(module: str) -> ast.Module:
    return ast.parse(MODULES[module][0].read_text())


def _module_level_imports(module: str) -> set[str]:
    return _imports(module, _tree(module).body)


def _all_imports(module: str) -> set[str]:
    """Module-level imports, imports inside functions and imports for type checking alone."""
    return _imports(module, ast.walk(_tree(module)))


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    (layer,) = [k for k, names in enumerate(LAYERS) if top in names]
    return layer


def test_imports_point_down_the_layers():
    upward = [(m, n) for m in MODULES for n in _all_imports(m) if _layer(n) > _layer(m)]
    assert upward == []


def test_no_import_cycles():
    graph = {m: _all_imports(m) for m in MODULES}
    state: dict[str, int] = {}
    path: list[str] = []
    cycles = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(path[path.index(n):] + [n])
            elif n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert cycles == []


def _imports_pennylane_itself(module: str) -> bool:
    return any(
        (isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "pennylane")
        or (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "pennylane" for a in node.names))
        for node in _tree(module).body
    )


@functools.lru_cache(maxsize=None)
def _imports_pennylane(module: str) -> bool:
    """Whether importing ``module`` imports PennyLane (itself, or through its module-level imports)."""
    reached, stack = set(), [module]
    while stack:  # each module once: the paths through the import graph are too many to walk
        m = stack.pop()
        if m not in reached:
            reached.add(m)
            if _imports_pennylane_itself(m):
                return True
            stack.extend(_module_level_imports(m))
    return False


def test_no_imports_inside_functions_except_of_pennylane_users():
    inner = {
        (m, n)
        for m in MODULES
        for f in ast.walk(_tree(m))
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in _imports(m, ast.walk(f))
    }
    assert inner and [(m, n) for m, n in inner if not _imports_pennylane(n)] == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m == "catalyst_lite.compiled" or m.startswith("catalyst_lite.compiler")))
def test_the_compiler_does_not_import_the_quantum_extension(module):
    assert not any(n.startswith("catalyst_lite.quantum") for n in _all_imports(module))


def test_jax_internals_are_imported_in_jax_extras_only():
    offenders = []
    for module, (path, _) in MODULES.items():
        if module.startswith("catalyst_lite.jax_extras"):
            continue
        for node in ast.walk(_tree(module)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            offenders += [(module, n) for n in names if n.startswith(("jax._src", "jax.interpreters"))]
    assert offenders == []


DYNAMIC_SHAPE_NAMES = {"DShapedArray", "DBIdx", "InDBIdx", "OutDBIdx"}


def test_jax_dynamic_shape_types_are_read_in_jax_extras_only():
    """JAX removed dynamic shapes after 0.7: only ``jax_extras`` may name their types."""
    offenders = []
    for module in MODULES:
        if module.startswith("catalyst_lite.jax_extras"):
            continue
        for node in ast.walk(_tree(module)):
            if isinstance(node, ast.ImportFrom):
                offenders += [(module, a.name) for a in node.names if a.name in DYNAMIC_SHAPE_NAMES]
            elif isinstance(node, ast.Attribute) and node.attr in DYNAMIC_SHAPE_NAMES:
                offenders.append((module, node.attr))
    assert offenders == []


def test_no_mid_module_imports():
    assert [m for m, (path, _) in MODULES.items() if "noqa: E402" in path.read_text()] == []
