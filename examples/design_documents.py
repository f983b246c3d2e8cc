"""The example programs of the design documents, run with catalyst_lite.

The documents are Catalyst's "Jax dynamically-shaped arrays" guide (000) and "Tracing and the
dynamic dimensions" (001), in /work/shared/seeds/ of the project. Each program below is the
document's program with ``catalyst`` replaced by ``catalyst_lite``. For each one we print the
result next to a NumPy reference and the jaxpr that ``.jaxpr`` shows (compare it with the
document's listing: variable names differ, the structure is the same).

Run:  python examples/design_documents.py
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from catalyst_lite import CatalystLiteError, for_loop, qjit

failures: list[str] = []


def section(title: str) -> None:
    print()
    print("=" * 100)
    print(title)
    print("=" * 100)


def report(label: str, result, expected) -> None:
    """Print a result and check it against its NumPy reference."""
    ok = np.allclose(np.asarray(result), np.asarray(expected)) and np.shape(result) == np.shape(expected)
    print(f"{label} = {result!r}   (NumPy reference: {np.asarray(expected)!r}) {'OK' if ok else 'MISMATCH'}")
    if not ok:
        failures.append(label)


def expect_error(label: str, thunk) -> None:
    """Programs that the documents say must be rejected: print the error catalyst_lite raises."""
    try:
        result = thunk()
    except (CatalystLiteError, TypeError, ValueError) as e:
        print(f"{label} -> {type(e).__name__}: {e}")
    else:
        print(f"{label} -> no error, result {result!r}: the document expects an error")
        failures.append(label)


# --- 000, "Tracing problem overview" ----------------------------------------------------------------

section("000: circuit(sz: int) -- a loop that adds the captured a0 (dimensions preserved)")


@qjit
def circuit(sz: int):
    a0 = jnp.ones([sz], dtype=float)

    @for_loop(0, 10, 1)
    def loop(i, a):
        return a + a0

    a2 = loop(a0)
    return a0 + a2


# `sz: int` is annotated, so the program was traced when the decorator ran: the jaxpr is there
# before the first call.
print(circuit.jaxpr)
for sz in (3, 5):
    report(f"circuit({sz})", circuit(sz), np.ones(sz) + 11 * np.ones(sz))


# --- 000, "Example 1/2": the two loop expansion modes -----------------------------------------------

section("000: g(x, y) with experimental_preserve_dimensions=True -- the body mixes a and x")


@qjit(abstracted_axes={0: "n"})
def g_preserve(x, y):
    @for_loop(0, 10, 1, experimental_preserve_dimensions=True)
    def loop(_, a):
        c = a * x
        # c = jnp.ones([a.shape[0]+1], dtype=float) # Not possible
        return c

    return jnp.sum(loop(y))


# The document writes jnp.ones([3], dtype=float): float64 under Catalyst, which switches on
# jax_enable_x64 for the whole process. catalyst_lite leaves the user's JAX configuration alone, so
# with x64 off that would be a float32 array; NumPy's ones are float64 like the document's.
a = np.ones([3], dtype=float)
b = np.ones([3], dtype=float)
report("g(a, b)", g_preserve(a, b), 3.0)
print(g_preserve.jaxpr)
x, y = np.arange(1.0, 6.0), np.full(5, 0.5)
report("g(arange(1, 6), 0.5 * ones(5))", g_preserve(x, y), np.sum(y * x**10))

section("000: g(x, y) with experimental_preserve_dimensions=False -- the body resizes a")


@qjit(abstracted_axes={0: "n"})
def g_resize(x, y):
    @for_loop(0, 10, 1, experimental_preserve_dimensions=False)
    def loop(_, a):
        # c =  a * x # Not possible
        c = jnp.ones([a.shape[0] + 1], dtype=float)
        return c

    return jnp.sum(loop(y))


report("g(a, b)", g_resize(a, b), 13.0)
print(g_resize.jaxpr)
report("g(ones(7), ones(7))", g_resize(np.ones(7), np.ones(7)), 17.0)

# --- 000, "Expanded/collapsed arguments or results" ---------------------------------------------------

section("000/001: f(sz) = jnp.ones((sz+1,)) -- an implicit result before the explicit one")


@qjit
def f(sz):
    o = jnp.ones((sz + 1,), dtype=float)
    return o


report("f(2)", f(2), np.ones(3))
print(f.jaxpr)

# --- 001, "Tracing problem overview" ------------------------------------------------------------------

section("001: circuit(sz: int) -- a loop that multiplies by the captured sz")


@qjit
def circuit_001(sz: int):
    a0 = jnp.ones([sz], dtype=float)

    @for_loop(0, 10, 1)
    def loop(i, a):
        return a * sz

    a2 = loop(a0)
    return a0 + a2


print(circuit_001.jaxpr)
for sz in (2, 3):
    report(f"circuit({sz})", circuit_001(sz), np.ones(sz) + np.ones(sz) * float(sz) ** 10)

# --- 001, "Loop expansion specifics": the default keeps the dimension-sharing pattern -----------------

section("001: loops over (a, a_) that keep or break the sharing of one dimension")


@qjit
def keep_pair(sz: int):
    a0 = jnp.ones([sz], dtype=float)

    @for_loop(0, 10, 1)
    def loop(i, a, a_):
        return a, a_

    return loop(a0, a0)


report("keep_pair(4)[1]", keep_pair(4)[1], np.ones(4))


def new_shared(allow_array_resizing: bool):
    @qjit
    def new_shared(sz: int):
        a0 = jnp.ones([sz], dtype=float)

        @for_loop(0, 10, 1, allow_array_resizing=allow_array_resizing)
        def loop(i, a, a_):
            b = jnp.ones([sz + 1], dtype=float)
            return b, b

        return loop(a0, a0)

    return new_shared(4)


# 001 calls this "CORRECT: still one shared dimension" under the default of the Catalyst version it
# describes, where a loop could resize arrays as long as the sharing pattern stayed. catalyst_lite
# follows today's Catalyst API: by default a for_loop keeps its carried dimensions (000's
# preserve_dimensions=True), so resizing needs allow_array_resizing=True.
try:
    new_shared(False)
except (CatalystLiteError, TypeError, ValueError) as e:
    print(f"new_shared(4) with the default -> {type(e).__name__}: {e}")
report("new_shared(4) with allow_array_resizing=True, [0]", new_shared(True)[0], np.ones(5))


def broken_sharing():
    @qjit
    def broken(sz: int):
        a0 = jnp.ones([sz], dtype=float)

        @for_loop(0, 10, 1)
        def loop(i, a, a_):
            b = jnp.ones([sz + 1], dtype=float)
            return a, b  # ERROR: dimensions are not the same any more

        return loop(a0, a0)

    return broken(4)


expect_error("loop returning (a, b) where a and a_ shared a dimension", broken_sharing)

section("001: experimental_preserve_dimensions=False -- every dimension is separate")


@qjit
def separate(sz: int):
    a0 = jnp.ones([sz], dtype=float)

    @for_loop(0, 10, 1, experimental_preserve_dimensions=False)
    def loop(i, a, b, b_):
        return a, b, b_  # CORRECT

    b0 = jnp.ones([sz + 1], dtype=float)
    a2, b2, b2_ = loop(a0, b0, b0)
    return a2, b2, b2_


outs = separate(3)
report("separate(3) shapes", [o.shape[0] for o in outs], [3, 4, 4])
print(separate.jaxpr)

# --- 001, "For-loop expansion specifics": a size from the loop index ---------------------------------

section("001: a loop body whose result size is the loop index (an OutDBIdx in the output type)")


@qjit
def from_index(n: int):
    @for_loop(0, n, 1, allow_array_resizing=True)
    def loop(i, b):
        b = jnp.ones([i], dtype=float)
        return b

    return loop(jnp.ones([0], dtype=float))


report("from_index(5)", from_index(5), np.ones(4))
print(from_index.jaxpr)

# --- 001, "Adding Jax constants": a captured array in a loop body --------------------------------------

section("001: a loop that captures a0 and returns loop(a0) directly")


@qjit
def captured(sz: int):
    a0 = jnp.ones([sz], dtype=float)

    @for_loop(0, 10, 1)
    def loop(i, a):
        return a + a0

    return loop(a0)


# 001 (written for an older Catalyst) says this raises, because the captured a0's dimension is a
# constant distinct from the argument's. 000's newer version of the same program (the first one
# above) preserves dimensions, so the sizes are one variable and it runs.
report("captured(4)", captured(4), np.full(4, 11.0))
print(captured.jaxpr)

section("summary")
if failures:
    raise SystemExit(f"{len(failures)} example(s) did not match: {failures}")
print("all design-document examples ran and matched their NumPy references")
