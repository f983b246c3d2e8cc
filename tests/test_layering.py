"""The package's layering, checked on its source: layers whose imports only point down, no import
cycles (counting the imports inside functions and those for type checking alone), imports inside
functions only of the modules that import PennyLane (which only programs that use it pay for), the
compiler independent of the quantum extension, JAX's internals imported in ``jax_extras`` only,
no mid-module imports, and no decision taken by reading an exception's text or traceback."""

import ast
import functools
import pathlib
import re
import sys

import pytest

import catalyst_lite

ROOT = pathlib.Path(catalyst_lite.__file__).parent

# Lowest first. A module imports modules of its own layer or of lower ones (top-level names: the
# module or package under ``catalyst_lite``).
LAYERS = (
    {"errors", "trace_context", "utils"},  # what everything reads (utils: Catalyst's path to errors)
    {"jax_extras"},  # the seam with JAX's internals
    # the representation of a traced program and what describes it: tracing, signatures, facts
    {"tracing", "signature", "diagnostics", "reporting", "settings",
     "compile_options", "passes", "versions"},
    {"compiler"},  # the runtime: specialization, executables, strategies, caches
    # the user API's parts: primitives and their rules, transformations, the frontends
    {"callbacks", "debug", "control_flow", "quantum", "transforms", "autograph", "capture",
     "api_extensions"},  # api_extensions: Catalyst's path to the callbacks and control flow
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


# --- Errors are told apart by their types, raised where they happen ----------------------------------

# Where reading frames (a traceback's, or the call stack's) is the job: locating the user's line
# for a message, filtering the frames shown. Nothing else reads frames, with one decision left:
# whose code asks a size for its Python value (JAX's shape logic or the user's), which no typed
# signal carries (see `jax_extras.dimensions._asked_by_library`; issue #24).
_READS_FRAMES = {
    ("catalyst_lite.diagnostics", "filtered"),
    ("catalyst_lite.jax_extras.frames", "user_line"),
    ("catalyst_lite.jax_extras.frames", "user_line_of_traceback"),
    ("catalyst_lite.jax_extras.dimensions", "user_call_site"),
}
_DECIDES_BY_FRAME = {("catalyst_lite.jax_extras.dimensions", "_asked_by_library")}
_FRAME_READS = ("walk_tb", "extract_tb", "tb_frame", "_getframe", "currentframe", "f_back")
_TEXT_TESTS = {"startswith", "endswith", "find", "index", "count", "search", "match", "fullmatch"}


def _exception_names(function: ast.AST) -> set[str]:
    """The names that hold exceptions in a function: bound by ``except ... as``, or parameters
    annotated with an exception class."""
    names = {h.name for h in ast.walk(function) if isinstance(h, ast.ExceptHandler) and h.name}
    if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        names |= {a.arg for a in function.args.args + function.args.kwonlyargs
                  if a.annotation is not None and re.search(r"Exception|Error\b", ast.unparse(a.annotation))}
    return names


def _is_text_of(node: ast.AST, names: set[str]) -> bool:
    """``str(err)``, ``repr(err)``, ``err.args``, ``err.args[0]`` for an exception ``err``."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("str", "repr"):
        return len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id in names
    return isinstance(node, ast.Attribute) and node.attr == "args" and isinstance(node.value, ast.Name) \
        and node.value.id in names


def _text_decisions(module: str) -> list[str]:
    found = []
    for function in ast.walk(_tree(module)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = _exception_names(function)
        for node in ast.walk(function):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _TEXT_TESTS:
                operands = [node.func.value, *node.args]
            else:
                continue
            if any(_is_text_of(x, names) for x in operands):
                found.append(f"{module}.{function.name}: {ast.unparse(node)}")
    return found


def test_no_decision_reads_an_exception_s_text():
    """No ``"..." in str(err)``, ``str(err).startswith(...)``, ``err.args[0] == ...``: an error
    reworded by JAX must not change what catalyst_lite does."""
    assert [d for m in MODULES for d in _text_decisions(m)] == []


def test_no_decision_reads_notes_or_traceback_frames():
    found = []
    for module in MODULES:
        for function in ast.walk(_tree(module)):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                notes = (isinstance(node, ast.Attribute) and node.attr == "__notes__") or (
                    isinstance(node, ast.Constant) and node.value == "__notes__")
                stack = isinstance(node, ast.Attribute) and (node.attr in _FRAME_READS or (
                    node.attr in ("stack", "trace") and isinstance(node.value, ast.Name) and node.value.id == "inspect"))
                frames = stack and (module, function.name) not in _READS_FRAMES | _DECIDES_BY_FRAME
                if notes or frames:
                    found.append(f"{module}.{function.name}: {ast.unparse(node)}")
    assert found == []
    # Every function named above still exists (a renamed one must not leave a stale permission).
    defined = {(m, f.name) for m in MODULES for f in ast.walk(_tree(m)) if isinstance(f, ast.FunctionDef)}
    assert _READS_FRAMES | _DECIDES_BY_FRAME <= defined


def test_program_choice_catches_only_typed_signals():
    """Which program a call runs is decided on catalyst_lite's typed signals: no handler there
    catches every exception (the user's own pass through, from the first trace)."""
    handlers = [h for h in ast.walk(_tree("catalyst_lite.compiler.assumptions")) if isinstance(h, ast.ExceptHandler)]
    broad = [ast.unparse(h.type) if h.type else "bare except" for h in handlers
             if h.type is None or ast.unparse(h.type) in ("Exception", "BaseException")]
    assert handlers and broad == []


@pytest.mark.parametrize("source, found", [
    ("def f():\n    try:\n        g()\n    except ValueError as err:\n        if 'x' in str(err):\n            pass", 1),
    ("def f(err: BaseException):\n    return str(err).startswith('Incompatible')", 1),
    ("def f():\n    try:\n        g()\n    except TypeError as e:\n        return e.args[0] == 'x'", 1),
    ("def f(err: BaseException):\n    return f'{err}: {str(err)}'", 0),
])
def test_text_decisions_are_found(source, found, monkeypatch):
    """The check above finds what it looks for (and not a message built from an error)."""
    monkeypatch.setitem(MODULES, "example", (None, False))
    monkeypatch.setattr(sys.modules[__name__], "_tree", lambda module: ast.parse(source))
    assert len(_text_decisions("example")) == found
