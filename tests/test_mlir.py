"""``QJIT.mlir``: StableHLO of the traced dynamic program (symbolic sizes as ``?``), and
``QJIT.specialized_mlir``: what XLA compiles for concrete sizes."""

import re
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from catalyst_lite import qjit
from catalyst_lite.compiler import lowering as user_lowering
from catalyst_lite.control_flow import cond, for_loop, while_loop
from catalyst_lite.jax_extras import core, mlir
from catalyst_lite.jax_extras import lowering as jax_lowering
from catalyst_lite.jax_extras.iree_lowering import lower_for_iree
from catalyst_lite.jax_extras.lowering import UnsupportedLowering, check_parses


def main_signature(text: str) -> str:
    """The ``func.func public @main(...) -> ...`` line."""
    (line,) = [l.strip() for l in text.splitlines() if "func.func public @main" in l]
    return line


def count(op: str, text: str) -> int:
    return len(re.findall(rf"\b{re.escape(op)}\b", text))


def ones_plus_one(sz: int):
    return jnp.ones((sz + 1,), dtype=float)


# --- straight-line programs --------------------------------------------------------------------


def test_the_module_is_named_by_the_function_name_as_in_catalyst():
    def annotated_builder():
        def f(x: float):
            return x * 2.0

        return qjit(f)

    def call_builder():
        def f(x):
            return x * 2.0

        return qjit(f)

    # one program from functions of one __name__ and different qualnames, traced at decoration
    # and at a call
    a, b = annotated_builder(), call_builder()
    b(1.0)
    assert a.mlir.startswith("module @f") and a.mlir == b.mlir


def test_ones_of_traced_size():
    f = qjit(ones_plus_one)
    text = f.mlir
    check_parses(text)
    assert text.startswith("module @ones_plus_one")
    # The implicit size result `sz + 1` comes first, as in the jaxpr.
    assert main_signature(text) == (
        "func.func public @main(%arg0: tensor<i64>) -> (tensor<i64>, tensor<?xf64>) {"
    )
    assert count("stablehlo.dynamic_broadcast_in_dim", text) == 1
    assert "stablehlo.add %arg0" in text  # sz + 1 computed on the i64 argument
    assert "-> tensor<?xf64>" in text


def test_abstracted_axes_elementwise_and_sum():
    @qjit(abstracted_axes={0: "n"})
    def g(x, y):
        return jnp.sum(x * y + 1.0)

    g(np.ones(3), np.ones(3))
    text = g.mlir
    check_parses(text)
    assert main_signature(text) == (
        "func.func public @main(%arg0: tensor<i64>, %arg1: tensor<?xf64>, %arg2: tensor<?xf64>)"
        " -> tensor<f64> {"
    )
    assert "stablehlo.multiply %arg1, %arg2 : tensor<?xf64>" in text
    # The scalar 1.0 is broadcast to the symbolic size %arg0.
    assert count("stablehlo.dynamic_broadcast_in_dim", text) == 1
    assert re.search(r"stablehlo\.convert %arg0 : \(tensor<i64>\) -> tensor<i32>", text)
    assert "stablehlo.reduce" in text and "applies stablehlo.add across dimensions = [0]" in text


def test_matmul_with_shared_symbolic_axis():
    @qjit(abstracted_axes=({0: "n"}, {1: "n"}))
    def mm(x, y):
        return x @ y

    mm(np.ones((3, 2)), np.ones((2, 3)))
    text = mm.mlir
    check_parses(text)
    assert main_signature(text) == (
        "func.func public @main(%arg0: tensor<i64>, %arg1: tensor<?x2xf64>, "
        "%arg2: tensor<2x?xf64>) -> tensor<?x?xf64> {"
    )
    assert "stablehlo.dot_general %arg1, %arg2, contracting_dims = [1] x [0]" in text


def test_arange_times_two():
    @qjit
    def a(n: int):
        return jnp.arange(n) * 2

    text = a.mlir
    check_parses(text)
    # One i64 argument; the result is tensor<?xi64> (possibly after its implicit size).
    assert re.fullmatch(
        r"func\.func public @main\(%arg0: tensor<i64>\) -> \(?(tensor<i64>, )?tensor<\?xi64>\)? \{",
        main_signature(text),
    )
    assert count("stablehlo.dynamic_iota", text) == 1
    assert "stablehlo.multiply" in text and "tensor<?xi64>" in text


def test_two_symbolic_axes_convert_and_transpose():
    @qjit(abstracted_axes={0: "n", 1: "m"})
    def k(x):
        return x.T.astype(int) + 1, jnp.sum(x, axis=1)

    k(np.ones((2, 3)))
    text = k.mlir
    check_parses(text)
    assert main_signature(text).startswith(
        "func.func public @main(%arg0: tensor<i64>, %arg1: tensor<i64>, %arg2: tensor<?x?xf64>)"
    )
    assert "stablehlo.transpose %arg2" in text
    assert re.search(r"stablehlo\.convert .* -> tensor<\?x\?xi64>", text)
    # The shape of the broadcast `1` is [m, n]: both dimension arguments, concatenated.
    assert "stablehlo.concatenate" in text


def test_closed_over_constant_is_a_constant():
    table = np.arange(3.0)

    @qjit
    def c(s: float):
        return table * s

    text = c.mlir
    check_parses(text)
    assert "dense<[0.000000e+00, 1.000000e+00, 2.000000e+00]> : tensor<3xf64>" in text


def test_mlir_is_of_the_one_trace():
    @qjit(abstracted_axes={0: "n"})
    def g(x):
        return x * 2.0

    g(np.ones(3))
    first = g.mlir
    g(np.ones(7))
    assert g.mlir == first
    assert "tensor<?xf64>" in first and "tensor<3xf64>" not in first


def test_mlir_before_first_call_is_none():
    @qjit
    def g(x):
        return x

    assert g.mlir is None


# --- specialization ------------------------------------------------------------------------------


def test_specialized_mlir_has_static_shapes():
    f = qjit(ones_plus_one)
    text = f.specialized_mlir(3)
    assert "tensor<4xf64>" in text
    assert "?" not in re.sub(r'"[^"]*"', "", text)  # no dynamic dimension outside string attributes
    assert "tensor<?xf64>" in f.mlir


def test_specialized_mlir_of_abstracted_axes():
    @qjit(abstracted_axes={0: "n"})
    def g(x, y):
        return jnp.sum(x * y + 1.0)

    text = g.specialized_mlir(np.ones(4), np.ones(4))
    assert "tensor<4xf64>" in text and "tensor<?x" not in text


# --- JAX is left as it was -----------------------------------------------------------------------


def test_global_config_and_jax_untouched():
    before = (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64)
    last_used, multi_broadcast = core.last_used, mlir.multi_broadcast_in_dim
    assert qjit(ones_plus_one).mlir
    assert (jax.config.jax_dynamic_shapes, jax.config.jax_enable_x64) == before
    assert core.last_used is last_used
    assert mlir.multi_broadcast_in_dim is multi_broadcast
    # Plain JAX still lowers as usual.
    assert "tensor<3xf32>" in jax.jit(lambda x: x + 1).lower(np.ones(3, np.float32)).as_text()


def test_mlir_while_another_thread_traces():
    errors = []

    def trace_many():
        try:
            for n in range(5):
                qjit(abstracted_axes={0: "n"})(lambda x: x + 1.0)(np.ones(n + 1))
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    thread = threading.Thread(target=trace_many)
    thread.start()
    texts = [qjit(ones_plus_one).mlir for _ in range(5)]
    thread.join()
    assert not errors
    assert all("tensor<?xf64>" in t for t in texts)


# --- bad input -----------------------------------------------------------------------------------


def test_program_to_mlir_rejects_non_programs():
    with pytest.raises(TypeError, match="Program"):
        user_lowering.program_to_mlir(object(), "f")


def test_lower_rejects_non_jaxpr():
    with pytest.raises(TypeError, match="ClosedJaxpr"):
        jax_lowering.lower_jaxpr_to_stablehlo("not a jaxpr", "f")


def test_check_parses_rejects_garbage():
    with pytest.raises(ValueError, match="not a valid MLIR module"):
        check_parses("func.func @f(")


# --- control flow --------------------------------------------------------------------------------


def scaled_loop(trip_count: int):
    @qjit(abstracted_axes={0: "n"})
    def loop(x):
        @for_loop(0, trip_count, 1)
        def body(i, acc):
            return acc * 2.0 + x

        return body(x)

    loop(np.ones(3))
    return loop.mlir


def test_for_loop_is_one_while_not_unrolled():
    ten, hundred = scaled_loop(10), scaled_loop(100)
    for text in (ten, hundred):
        check_parses(text)
        assert count("stablehlo.while", text) == 1
        assert count("stablehlo.multiply", text) == 1  # the body appears once
        assert "tensor<?xf64>" in text
    assert "dense<10>" in ten and "dense<100>" in hundred
    # Apart from the trip count, the two programs are the same.
    assert ten.replace("dense<10>", "dense<N>") == hundred.replace("dense<100>", "dense<N>")


def test_for_loop_with_traced_bound_carries_index_and_value():
    @qjit
    def f(n: int):
        @for_loop(0, n, 1)
        def body(i, acc):
            return acc + i

        return body(0)

    text = f.mlir
    check_parses(text)
    assert count("stablehlo.while", text) == 1
    carried = r"stablehlo\.while\(%iterArg = %\w+, %iterArg_\d+ = %\w+\) : tensor<i64>, tensor<i64>"
    assert re.search(carried, text)  # the index and the accumulator
    assert re.search(r"compare\s+LT, %iterArg, %arg0", text)  # i < n
    assert int(f(5)) == 10


def test_resizing_for_loop_carries_its_dimension():
    @qjit
    def grow(n: int):
        @for_loop(0, n, 1, allow_array_resizing=True)
        def body(i, a):
            return jnp.ones((i + 1,), dtype=float)

        return body(jnp.zeros((2,)))

    text = grow.mlir
    check_parses(text)
    assert main_signature(text) == (
        "func.func public @main(%arg0: tensor<i64>) -> (tensor<i64>, tensor<?xf64>) {"
    )
    # Carried: index, the array's size, the array (static size 2 made symbolic).
    assert re.search(r"stablehlo\.while\(.*\) : tensor<i64>, tensor<i64>, tensor<\?xf64>", text)
    assert count("stablehlo.dynamic_broadcast_in_dim", text) == 1
    assert grow(4).shape == (4,)


def test_nested_for_loops_are_nested_whiles():
    @qjit
    def f(n: int):
        @for_loop(0, n, 1)
        def outer(i, acc):
            @for_loop(0, i, 1)
            def inner(j, a):
                return a + j

            return inner(acc)

        return outer(0)

    text = f.mlir
    check_parses(text)
    assert count("stablehlo.while", text) == 2


def test_while_loop_is_one_while():
    @qjit(abstracted_axes={0: "n"})
    def w(x):
        @while_loop(lambda v, k: k < 10)
        def step(v, k):
            return v * 2.0, k + 1

        return step(x, 0)

    w(np.ones(3))
    text = w.mlir
    check_parses(text)
    assert count("stablehlo.while", text) == 1
    assert count("stablehlo.multiply", text) == 1
    assert re.search(r"stablehlo\.while\(.*\) : tensor<\?xf64>, tensor<i64>", text)
    assert re.search(r"compare\s+LT, %iterArg_\d+, %c", text)  # k < 10 in the cond region
    assert main_signature(text).endswith("-> (tensor<?xf64>, tensor<i64>) {")


def test_resizing_while_loop():
    @qjit
    def grow(n: int):
        @while_loop(lambda a: a.shape[0] < n, allow_array_resizing=True)
        def step(a):
            return jnp.ones((a.shape[0] + 1,))

        return step(jnp.ones((1,)))

    text = grow.mlir
    check_parses(text)
    assert count("stablehlo.while", text) == 1
    assert re.search(r"stablehlo\.while\(.*\) : tensor<i64>, tensor<\?xf64>", text)
    assert grow(4).shape == (4,)


def test_cond_is_one_case_with_a_region_per_branch():
    @qjit
    def sign(x: float):
        @cond(x > 0)
        def s():
            return 1.0

        @s.else_if(x < 0)
        def s():
            return -1.0

        @s.otherwise
        def s():
            return 0.0

        return s()

    text = sign.mlir
    check_parses(text)
    assert count('"stablehlo.case"', text) == 1 or count("stablehlo.case", text) == 1
    case = text[text.index("stablehlo.case") :]
    assert case.count("stablehlo.return") == 3  # branch, else_if, otherwise
    assert count("stablehlo.select", text) == 2  # index of the first predicate that holds
    assert "(tensor<i32>) -> tensor<f64>" in case
    assert float(sign(-2.0)) == -1.0


def test_cond_with_branch_dependent_size():
    @qjit
    def pick(n: int):
        @cond(n > 2)
        def s():
            return jnp.ones((n,))

        @s.otherwise
        def s():
            return jnp.zeros((n + 1,))  # a number here would be refused, as Catalyst does

        return s()

    text = pick.mlir
    check_parses(text)
    assert main_signature(text) == (
        "func.func public @main(%arg0: tensor<i64>) -> (tensor<i64>, tensor<?xf64>) {"
    )
    assert "(tensor<i32>) -> (tensor<i64>, tensor<?xf64>)" in text
    assert "stablehlo.return %arg0" in text  # the size of branch 0 is n
    assert pick(5).shape == (5,) and pick(1).shape == (2,)


def test_cond_inside_loop_body_is_lowered_once():
    @qjit(abstracted_axes={0: "n"})
    def f(x):
        @for_loop(0, 10, 1)
        def body(i, acc):
            @cond(i % 2 == 0)
            def step():
                return acc * 2.0

            @step.otherwise
            def step():
                return acc + 1.0

            return step()

        return body(x)

    f(np.ones(3))
    text = f.mlir
    check_parses(text)
    assert count("stablehlo.while", text) == 1
    assert count("stablehlo.case", text) == 1
    assert count("stablehlo.multiply", text) == 1
    body = text[text.index("} do {") :]
    assert "stablehlo.case" in body


def test_slices_with_symbolic_bounds_lower_to_dynamic_gather():
    """`x[1:]` carries its symbolic slice size as an operand; `.mlir` puts it back in the gather."""

    @qjit(abstracted_axes={0: "n"})
    def diffs(x):
        return x[1:] - x[:-1]

    np.testing.assert_array_equal(diffs(np.arange(5.0)), np.ones(4))
    text = diffs.mlir
    assert text.count("stablehlo.dynamic_gather") == 2
    assert "tensor<?xf64>" in text


# --- functions lowered through JAX's helpers -----------------------------------------------------


@pytest.mark.parametrize(
    "fn, op",
    [
        (lambda x: jnp.argmax(x), "stablehlo.reduce"),  # a variadic reduce
        (lambda x: jnp.sort(-x), "stablehlo.sort"),
        (lambda x: jnp.argsort(x), "stablehlo.sort"),
        (lambda x: jnp.take(x, jnp.array([0, 2])), "stablehlo.gather"),  # clamped by lower_fun
    ],
    ids=["argmax", "sort", "argsort", "take"],
)
def test_functions_lowered_through_lower_fun_show_symbolic_sizes(fn, op):
    f = qjit(fn, abstracted_axes={0: "n"})
    f(np.arange(4.0))
    text = f.mlir
    check_parses(text)
    assert op in text and "tensor<?xf64>" in text


def test_dynamic_broadcasts_say_which_dimensions_expand():
    @qjit(abstracted_axes={0: "n"})
    def scaled(x):
        return x[:, None] * jnp.array([1.0, 2.0, 3.0])

    scaled(np.ones(2))
    (expanding,) = [l for l in scaled.mlir.splitlines() if "(tensor<?x1xf64>" in l and "dynamic_broadcast" in l]
    assert "known_expanding_dimensions = array<i64: 1>" in expanding
    assert "known_nonexpanding_dimensions = array<i64: 0>" in expanding


# --- the program for IREE (jax_extras/iree_lowering.py; needs JAX only) ---------------------------


def for_iree(f, *args) -> str:
    f(*args)
    return lower_for_iree(f.jaxpr, "f")


def test_for_iree_reshapes_are_tensor_reshapes_and_slices_real_dynamic_slices():
    f = qjit(lambda x: (x.reshape(-1, 1) * jnp.ones(3)).reshape(-1) + 0 * jnp.sum(x[1:]), abstracted_axes={0: "n"})
    text = for_iree(f, np.ones(4))
    assert '"tensor.reshape"' in text and "stablehlo.dynamic_reshape" in f.mlir
    assert "stablehlo.dynamic_reshape" not in text and "dynamic_gather" not in text
    assert "stablehlo.real_dynamic_slice" in text


@pytest.mark.parametrize(
    "fn, batch_matmul",
    [(lambda x: x @ x, False), (lambda x: jnp.outer(x, x) @ jnp.outer(x, x), True)],
    ids=["vector-vector", "matrix-matrix"],
)
def test_for_iree_dot_products_take_the_batch_matmul_form(fn, batch_matmul):
    text = for_iree(qjit(fn, abstracted_axes={0: "n"}), np.ones(3))
    assert ("stablehlo.dot_general" in text) == batch_matmul
    if not batch_matmul:  # a product broadcast to [B, M, N, K] and a sum over K
        assert "stablehlo.reduce" in text


def test_for_iree_a_resizing_loop_is_refused_and_a_preserving_one_is_not():
    @qjit
    def grow(n: int):
        @for_loop(0, 3, 1, allow_array_resizing=True)
        def body(i, a):
            return jnp.ones((a.shape[0] + 1,))

        return body(jnp.zeros((n,)))

    with pytest.raises(UnsupportedLowering, match="resizes its carried arrays"):
        for_iree(grow, 2)
    assert grow.mlir.count("stablehlo.while") == 1  # what QJIT.mlir shows is unchanged
    text = for_iree(qjit(scaled_loop_program), 4)
    assert text.count("stablehlo.while") == 1 and "stablehlo.real_dynamic_slice" in text  # sizes tied


def scaled_loop_program(n: int):
    @for_loop(0, n, 1)
    def body(i, a):
        return a * 2.0

    return body(jnp.ones([n]))
