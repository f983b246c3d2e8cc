"""The benchmarked programs, each written once against a Catalyst-style front end and once by
hand for ``jax.jit``.

A front end is a module with ``qjit``, ``for_loop`` and ``while_loop`` (``catalyst_lite`` or
``catalyst``): the same source runs on both. Every builder returns a *fresh* compiled function, so
a benchmark of first-call latency pays for tracing and compiling each time.
"""

from __future__ import annotations

import functools
import itertools
import types
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["Program", "PROGRAMS", "SHRINK", "WHILE_STEPS", "LOOP_STEPS", "APPEND_STEPS", "GRAD_STEPS", "MIXED_STEPS"]

LOOP_STEPS = 10
WHILE_STEPS = 100
SHRINK = 0.99


@dataclass(frozen=True)
class Program:
    """One program: a builder per front end (taking the front-end module) and one for jax.jit."""

    description: str
    frontend: Callable[[ModuleType], Callable]
    jax_jit: Callable[[], Callable]


# --- design document 000's first program ---------------------------------------------------------


def circuit(api: ModuleType) -> Callable:
    @api.qjit
    def circuit(sz: int):
        a0 = jnp.ones([sz], dtype=float)

        @api.for_loop(0, LOOP_STEPS, 1)
        def loop(i, a):
            return a + a0

        a2 = loop(a0)
        return a0 + a2

    return circuit


def circuit_jax() -> Callable:
    @functools.partial(jax.jit, static_argnums=0)
    def circuit(sz):
        a0 = jnp.ones([sz], dtype=float)
        a2 = lax.fori_loop(0, LOOP_STEPS, lambda i, a: a + a0, a0)
        return a0 + a2

    return circuit


# --- the same program with a Python `for` loop and autograph ---------------------------------------

_fresh_names = itertools.count()


def _fresh(fn: Callable) -> Callable:
    """``fn`` with a code object of its own: caches keyed on code (autograph's conversions, in
    catalyst_lite and in Catalyst) miss, so a first call pays for converting the source."""
    code = fn.__code__.replace(co_name=f"{fn.__code__.co_name}_{next(_fresh_names)}")
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def circuit_autograph(api: ModuleType) -> Callable:
    def circuit(sz: int):
        a0 = jnp.ones([sz], dtype=float)
        a2 = a0
        for i in range(LOOP_STEPS):
            a2 = a2 + a0
        return a0 + a2

    return api.qjit(autograph=True)(_fresh(circuit))


# --- a while_loop over an array argument ---------------------------------------------------------


def decay(api: ModuleType) -> Callable:
    @api.qjit
    def decay(a):
        @api.while_loop(lambda i, a: i < WHILE_STEPS)
        def loop(i, a):
            return i + 1, a * SHRINK + jnp.sin(a)

        return loop(0, a)[1]

    return decay


def decay_jax() -> Callable:
    @jax.jit
    def decay(a):
        def body(carry):
            i, a = carry
            return i + 1, a * SHRINK + jnp.sin(a)

        return lax.while_loop(lambda carry: carry[0] < WHILE_STEPS, body, (0, a))[1]

    return decay


# --- one function over arrays of many sizes ------------------------------------------------------


def _energy(x: Any) -> tuple[Any, Any]:
    y = jnp.sin(x) * 2.0 + x
    return y, jnp.sum(y * y)


def energy(api: ModuleType, **options: Any) -> Callable:
    @api.qjit(abstracted_axes={0: "n"}, **options)
    def energy(x):
        return _energy(x)

    return energy


def _lite_options(api: ModuleType, **options: Any) -> dict[str, Any]:
    """``options`` for catalyst_lite (Catalyst has no such options and gets none)."""
    return options if api.__name__ == "catalyst_lite" else {}


def energy_xla(api: ModuleType) -> Callable:
    # One XLA compilation per size, as without the optional IREE backend.
    return energy(api, **_lite_options(api, size_generic=False))


def energy_jax() -> Callable:
    @jax.jit
    def energy(x):
        return _energy(x)

    return energy


# --- a loop that appends one element per iteration, and the same loop at a fixed size -------------


def grow(api: ModuleType) -> Callable:
    @api.qjit
    def grow(sz: int):
        @api.for_loop(0, LOOP_STEPS, 1, allow_array_resizing=True)
        def loop(i, a):
            return jnp.concatenate([a * 0.5, a[:1] + i])

        return loop(jnp.ones([sz], dtype=float))

    return grow


def grow_jax() -> Callable:
    # jax.jit has no resizing loop: the loop is unrolled at trace time.
    @functools.partial(jax.jit, static_argnums=0)
    def grow(sz):
        a = jnp.ones([sz], dtype=float)
        for i in range(LOOP_STEPS):
            a = jnp.concatenate([a * 0.5, a[:1] + i])
        return a

    return grow


def fixed(api: ModuleType) -> Callable:
    @api.qjit
    def fixed(sz: int):
        @api.for_loop(0, LOOP_STEPS, 1)
        def loop(i, a):
            return a * 0.5 + (a[:1] + i)

        return loop(jnp.ones([sz], dtype=float))

    return fixed


def fixed_jax() -> Callable:
    @functools.partial(jax.jit, static_argnums=0)
    def fixed(sz):
        return lax.fori_loop(0, LOOP_STEPS, lambda i, a: a * 0.5 + (a[:1] + i), jnp.ones([sz]))

    return fixed


# --- the smallest call ---------------------------------------------------------------------------


def add_one(api: ModuleType) -> Callable:
    @api.qjit
    def add_one(x):
        return x + 1.0

    return add_one


def add_one_jax() -> Callable:
    return jax.jit(lambda x: x + 1.0)


def _add_one_leaves(tree: Any) -> Any:
    return jax.tree_util.tree_map(lambda x: x + 1.0, tree)


def add_one_tree(api: ModuleType) -> Callable:
    return api.qjit(_add_one_leaves)


def add_one_tree_jax() -> Callable:
    return jax.jit(_add_one_leaves)


def _sum5(a, b, c, d, e):
    return a + b + c + d + e


def sum5(api: ModuleType) -> Callable:
    return api.qjit(_sum5)


def sum5_jax() -> Callable:
    return jax.jit(_sum5)


def _affine(x, k):
    return x * k + 1.0


def affine(api: ModuleType) -> Callable:
    return api.qjit(_affine)


def affine_jax() -> Callable:
    return jax.jit(_affine)


# --- #17 item 3: programs that need the host -----------------------------------------------------

APPEND_STEPS = 400
GRAD_STEPS = 5000
STATIC_OPS = 100
MIXED_STEPS = 4


def append(api: ModuleType) -> Callable:
    @api.qjit
    def append(n: int):
        @api.for_loop(0, n, 1, allow_array_resizing=True)
        def loop(i, a):
            return jnp.concatenate([a, a[-1:] * 0.5 + i])

        return loop(jnp.ones([1], dtype=float))

    return append


def append_jax() -> Callable:
    # jax.jit at a static size: the final array allocated at once, one element written per step.
    @functools.partial(jax.jit, static_argnums=0)
    def append(n):
        a = jnp.ones([n + 1], dtype=float)
        return lax.fori_loop(0, n, lambda i, a: a.at[i + 1].set(a[i] * 0.5 + i), a)

    return append


def grad_step(i, a):
    return jnp.sin(a) * 0.99 + 0.01 * i


def grad_loop(api: ModuleType) -> Callable:
    @api.qjit
    def grad_loop(x, n: int):
        def f(x):
            @api.for_loop(0, n, 1)
            def loop(i, a):
                return grad_step(i, a)

            return jnp.sum(loop(x))

        return api.grad(f)(x)

    return grad_loop


def grad_while(api: ModuleType) -> Callable:
    # The same steps in a while_loop, whose trip count reverse mode learns by running it.
    @api.qjit
    def grad_while(x, n: float):
        def f(x):
            @api.while_loop(lambda i, a: i < n)
            def loop(i, a):
                return i + 1.0, grad_step(i, a)

            return jnp.sum(loop(0.0, x)[1])

        return api.grad(f)(x)

    return grad_while


def grad_loop_jax() -> Callable:
    @functools.partial(jax.jit, static_argnums=1)
    def grad_loop(x, n):
        return jax.grad(lambda x: jnp.sum(lax.fori_loop(0, n, grad_step, x)))(x)

    return grad_loop


def _static_ops(x: Any) -> Any:
    for _ in range(STATIC_OPS // 2):
        x = jnp.sin(x) * 0.5  # two operations
    return x


def mixed(api: ModuleType) -> Callable:
    @api.qjit
    def mixed(x, n: int):
        x = _static_ops(x)

        @api.while_loop(lambda i, a: i < n, allow_array_resizing=True)
        def grow(i, a):
            return i + 1, jnp.concatenate([a, a[-1:] * 0.5])

        return grow(0, x)[1]

    return mixed


def mixed_jax() -> Callable:
    # The same program at a static size: the resizing loop unrolled by jax.jit.
    @functools.partial(jax.jit, static_argnums=1)
    def mixed(x, n):
        x = _static_ops(x)
        for _ in range(n):
            x = jnp.concatenate([x, x[-1:] * 0.5])
        return x

    return mixed


PROGRAMS: dict[str, Program] = {
    "circuit": Program("design doc 000: for_loop a + a0, 10 iterations", circuit, circuit_jax),
    "circuit_autograph": Program("the same with a Python for loop, autograph=True", circuit_autograph, circuit_jax),
    "decay": Program(f"while_loop a*{SHRINK} + sin(a), {WHILE_STEPS} iterations", decay, decay_jax),
    "energy": Program("abstracted_axes: sin(x)*2 + x and its sum of squares", energy, energy_jax),
    "energy_xla": Program("the same, XLA per size (catalyst_lite without IREE)", energy_xla, energy_jax),
    "grow": Program(f"for_loop appending 1 element, {LOOP_STEPS} iterations", grow, grow_jax),
    "fixed": Program(f"the same for_loop at a fixed size", fixed, fixed_jax),
    "add_one": Program("x + 1.0", add_one, add_one_jax),
    "add_one_tree": Program("x + 1.0 on every leaf of a pytree", add_one_tree, add_one_tree_jax),
    "sum5": Program("a + b + c + d + e", sum5, sum5_jax),
    "affine": Program("x * k + 1.0", affine, affine_jax),
    "append": Program(f"for_loop with a traced trip count appending 1 element per step", append, append_jax),
    "grad_loop": Program("grad through a for_loop with a traced trip count", grad_loop, grad_loop_jax),
    "mixed": Program(f"{STATIC_OPS} static operations, then a resizing while_loop", mixed, mixed_jax),
}
