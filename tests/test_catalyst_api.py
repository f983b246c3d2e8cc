"""Catalyst 0.15's ``qjit`` object, ``CompileOptions``, ``catalyst.debug``'s compiler-stage
functions and its autograph module flags, as catalyst_lite provides them (see
docs/catalyst-compatibility.md): the same names, defaults and checks, and for what only Catalyst's
MLIR toolchain can do, a clear ``UnsupportedOperationError``."""

import functools
import logging
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import catalyst_lite
from catalyst_lite import CompileError, CompileOptions, debug, qjit
from catalyst_lite.compile_options import KeepIntermediateLevel
from catalyst_lite.errors import AutoGraphWarning, UnsupportedOperationError


def doubled(x):
    """doubles x"""
    return x * 2.0


# --- compile_options -----------------------------------------------------------------------------


def test_compile_options_has_catalysts_fields_and_defaults():
    """Catalyst's ``QJIT.compile_options`` is its ``CompileOptions`` record: ``static_argnums``
    an empty tuple by default, ``keep_intermediate`` a level, ``target="binary"``..."""
    o = qjit(doubled).compile_options
    assert isinstance(o, CompileOptions)
    assert o.static_argnums == () and o.static_argnames is None and o.autograph_include == ()
    assert o.keep_intermediate == KeepIntermediateLevel.NONE and o.target == "binary"
    assert (o.seed, o.pipelines, o.circuit_transform_pipeline, o.abstracted_axes) == (None,) * 4
    assert (o.autograph, o.verbose, o.async_qnodes, o.disable_assertions) == (False,) * 4
    assert o.capture == "global" and o.pass_plugins == set() and o.dialect_plugins == set()


def test_compile_options_records_the_options_given(tmp_path, monkeypatch):
    """``static_argnames`` are kept as given and their positions join ``static_argnums``, as in
    Catalyst."""
    monkeypatch.chdir(tmp_path)  # keep_intermediate writes there
    f = qjit(static_argnames=["n"], keep_intermediate=True, seed=3, disable_assertions=True)(
        lambda x, n: x * n
    )
    o = f.compile_options
    assert o.static_argnums == (1,) and o.static_argnames == ["n"]
    assert o.keep_intermediate == KeepIntermediateLevel.PIPELINE and o.seed == 3 and o.disable_assertions
    assert float(f(2.0, 3)) == 6.0


@pytest.mark.parametrize("level, expected", [(False, 0), (True, 1), (2, 2), ("pass", 3), ("none", 0), (None, 0)])
def test_keep_intermediate_levels(level, expected):
    assert CompileOptions(keep_intermediate=level).keep_intermediate == expected


def test_compile_options_checks_as_catalyst_does():
    """Catalyst: an int ``static_argnums`` becomes a tuple; a bad ``keep_intermediate``, seed or
    capture is a ``ValueError``; a seed with ``async_qnodes`` a ``CompileError``."""
    assert CompileOptions(static_argnums=1).static_argnums == (1,)
    assert CompileOptions(static_argnums=[2, 0]).static_argnums == (2, 0)
    for bad in [dict(keep_intermediate="all"), dict(seed=-1), dict(capture="yes")]:
        with pytest.raises(ValueError):
            CompileOptions(**bad)
    with pytest.raises(CompileError, match="async"):
        CompileOptions(seed=1, async_qnodes=True)


def test_autograph_include_needs_autograph():
    """Catalyst raises ``CompileError`` at decoration."""
    with pytest.raises(CompileError, match="autograph=True"):
        qjit(autograph_include=["math"])(doubled)


# --- the QJIT object -----------------------------------------------------------------------------


def test_qjit_wraps_the_function_as_catalyst_does():
    f = qjit(doubled)
    assert (f.__name__, f.__doc__, f.__wrapped__) == ("doubled", "doubles x", doubled)
    assert f.original_function is doubled and f.user_function is doubled
    assert f.pre_compilation() is doubled
    # A callable without a name is "unknown", as Catalyst names it.
    assert qjit(functools.partial(lambda x, y: x * y, y=3.0)).__name__ == "unknown"


def test_autograph_user_function_is_the_converted_one():
    def f(x):
        if x > 0:
            x = x * 2.0
        return x

    g = qjit(autograph=True)(f)
    assert g.original_function is f and g.user_function is not f
    assert float(g(1.5)) == 3.0 and float(g(-1.5)) == -1.5


def test_jit_compile_compiles_without_running():
    """Catalyst's ``jit_compile(args)`` traces and compiles for the arguments; the call then only
    runs."""
    calls = []

    def f(x):
        calls.append(1)
        return jnp.sin(x) * 2.0

    g = qjit(f)
    assert g.jit_compile((np.arange(3.0),)) is False
    assert len(calls) == 1 and g.jaxpr is not None and g.cache_info().executables == 1
    np.testing.assert_allclose(g(np.arange(3.0)), np.sin(np.arange(3.0)) * 2.0)
    assert len(calls) == 1 and g.cache_info().executables == 1


def test_run_calls_and_aot_compile_traces_the_annotations():
    g = qjit(lambda x: x + 1.0)
    assert float(g.run((2.0,), {})) == 3.0
    with pytest.raises(TypeError, match="annotated"):
        g.aot_compile()

    def h(x: float):
        return x * 3.0

    compiled = qjit(h)
    compiled.aot_compile()
    assert compiled.jaxpr is not None and float(compiled(2.0)) == 6.0


def test_ir_attributes():
    """``mlir_opt`` is the StableHLO XLA receives (XLA optimizes internally); there is no LLVM IR,
    and without ``keep_intermediate`` no workspace of intermediate files."""
    f = qjit(doubled)
    assert f.mlir is None and f.mlir_opt is None and f.out_treedef is None
    f(1.0)
    assert f.mlir_opt == f.mlir and "stablehlo" in f.mlir
    assert f.llvmir is None and f.workspace is None
    assert f.out_treedef == jax.tree_util.tree_structure(0.0)


def test_keep_intermediate_keeps_each_program_in_a_directory_named_after_the_function(tmp_path, monkeypatch):
    """With ``keep_intermediate``, each traced program's jaxpr and StableHLO are written to a new
    directory of the working directory named after the function (``name_1``... when taken);
    ``workspace`` is the latest program's, and ``cleanup()`` removes it."""
    monkeypatch.chdir(tmp_path)

    def scale(x):
        return x * 3

    first = qjit(scale, keep_intermediate=True)
    assert first.workspace is None  # nothing traced yet
    assert float(first(2.0)) == 6.0
    same_name = qjit(scale, keep_intermediate=True)
    assert int(same_name(np.arange(2)).sum()) == 3
    assert {p.name for p in tmp_path.iterdir()} == {"scale", "scale_1"}
    workspace = first.workspace
    assert str(workspace) == str(tmp_path / "scale") and workspace.is_dir()
    assert (tmp_path / "scale" / "scale.mlir").read_text() == first.mlir
    assert (tmp_path / "scale" / "scale.jaxpr").read_text() == str(first.jaxpr)
    assert float(first(5)) == 15.0  # an int promotes to the float program: no new directory
    assert first.workspace is workspace
    assert complex(first(1j)) == 3j  # a new signature is a new program, in a new directory
    assert first.workspace.path == tmp_path / "scale_2"
    workspace.cleanup()
    assert not workspace.is_dir() and {p.name for p in tmp_path.iterdir()} == {"scale_1", "scale_2"}
    assert qjit(scale)(1.0) == 3.0 and {p.name for p in tmp_path.iterdir()} == {"scale_1", "scale_2"}


def test_compiled_function_changes_exactly_when_a_call_needs_another_program():
    """Catalyst's ``compiled_function``: one object per compiled program, the latest call's."""
    f = qjit(lambda x, k: x * k, static_argnums=1)
    assert f.compiled_function is None
    assert float(f(1.5, 2)) == 3.0
    first = f.compiled_function
    assert first is not None
    assert float(f(2.5, 3)) == 7.5  # another static value: another program
    second = f.compiled_function
    assert second is not first
    assert float(f(4.0, 2)) == 8.0  # the first static value again: its program again
    assert f.compiled_function is first
    assert float(f(np.int32(3), 2)) == 6.0  # an int32 promotes to the float64 signature: run it
    assert f.compiled_function is first
    assert complex(f(3j, 2)) == 6j  # a complex does not promote to float64: another program
    assert f.compiled_function not in (first, second)


@pytest.mark.parametrize("stage", ["compile", "generate_ir", "capture", "call_with_wrapper"])
def test_catalysts_pipeline_stages_are_explained(stage):
    f = qjit(doubled)
    with pytest.raises(UnsupportedOperationError, match=f"doubled.{stage}.*XLA"):
        getattr(f, stage)()
    with pytest.raises(AttributeError):
        f.no_such_attribute


def test_arguments_not_matching_annotations_are_traced_for_their_types():
    """Catalyst warns and compiles for the arguments' own types."""
    @qjit
    def f(x: float):
        return x * 2.0

    with pytest.warns(UserWarning, match="did not match declared signature"):
        out = f(jnp.arange(3.0))
    np.testing.assert_allclose(out, np.arange(3.0) * 2.0)
    assert float(f(True)) == 2.0  # a bool promotes to the annotated float


def test_an_array_whose_dtype_does_not_promote_to_the_annotated_one_is_traced_with_a_warning():
    @qjit
    def f(x: jax.ShapeDtypeStruct((), jnp.int8)):
        return x * 3

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert f(np.int8(2)).dtype == jnp.int8  # the annotated program, no warning
    annotated = f.compiled_function
    with pytest.warns(UserWarning, match="did not match declared signature"):
        out = f(np.float32(2.5))
    assert out.dtype == np.float32 and float(out) == 7.5
    assert f.compiled_function is not annotated



@pytest.mark.parametrize("annotation, argument", [
    (jax.core.ShapedArray((3,), jnp.float64), np.ones(4)),  # another shape
    (jax.core.ShapedArray((2, 2), jnp.float64), np.arange(4.0)),  # another rank
    (jax.core.ShapedArray((), jnp.float32), 1.5),  # a Python float is a float64, as in Catalyst
    (jax.core.ShapedArray((), jnp.int32), 5),  # a Python int is an int64
    (jax.core.ShapedArray((2,), jnp.float64), [1.0, 2.0]),  # a list is not an array
    (jax.core.ShapedArray((3,), jnp.float64), 1.0),  # a scalar for an array
    (jnp.float32, 1.5),  # a dtype: a scalar of it
    (np.int16, np.int32(3)),
    (jnp.float32, np.ones(2, np.float32)),
])
def test_arguments_of_another_shape_or_structure_than_annotated_warn_and_are_traced_for_themselves(
    annotation, argument
):
    """Catalyst warns for every call that does not fit the annotated signature, not only for
    dtypes that do not promote; the warning names the line of the call."""
    def double(x):
        return jax.tree_util.tree_map(lambda v: v * 2, x)

    double.__annotations__ = {"x": annotation}
    f = qjit(double)
    with pytest.warns(UserWarning, match="did not match declared signature") as record:
        out = f(argument)
    assert [w.filename for w in record] == [__file__]  # the warning points at the user's call
    expected = jax.jit(double)(argument)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(expected)
    for o, e in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(expected)):
        assert o.dtype == e.dtype and o.shape == e.shape
        np.testing.assert_array_equal(o, e)

# --- catalyst.debug's compiler stages ------------------------------------------------------------


def test_get_compilation_stage_is_the_stablehlo():
    f = qjit(doubled)
    with pytest.raises(ValueError, match="not been traced"):
        debug.get_compilation_stage(f, "mlir")
    f(1.0)
    assert debug.get_compilation_stage(f, "mlir") == f.mlir
    with pytest.raises(ValueError, match="one stage"):
        debug.get_compilation_stage(f, "HLOLoweringStage")
    with pytest.raises(TypeError, match="qjit function"):
        debug.get_compilation_stage(doubled, "mlir")
    assert debug.get_compilation_stages_groups(f.compile_options) == []


def test_instrumentation_reports_traces_and_compilations(tmp_path):
    f = qjit(doubled)
    logger = logging.getLogger("catalyst_lite")
    before = (list(logger.handlers), logger.level)
    log = tmp_path / "session.txt"
    with debug.instrumentation("s1", filename=str(log), detailed=True):
        assert float(f(1.5)) == 3.0
    text = log.read_text()
    assert "[s1] doubled: traced" in text and "XLA" in text
    assert (list(logger.handlers), logger.level) == before
    f(2.5)  # after the block: nothing more is written
    assert log.read_text() == text


@pytest.mark.parametrize("call", [
    lambda f: debug.replace_ir(f, "mlir", "module {}"),
    lambda f: debug.get_cmain(f, 1.0),
    lambda f: debug.compile_executable(f, 1.0),
    lambda f: catalyst_lite.draw_graph(f),
])
def test_toolchain_functions_raise_unsupported(call):
    with pytest.raises(UnsupportedOperationError, match="XLA"):
        call(qjit(doubled))


# --- autograph's module flags --------------------------------------------------------------------


def _loop_over_a_python_list(x):
    weights = [1.0, 2.0, 3.0]
    s = 0.0
    for i in range(3):
        s = s + weights[i] * x  # cannot be compiled: runs as a Python loop
    return s


def test_autograph_flags_default_to_a_warning_fallback():
    assert catalyst_lite.autograph_ignore_fallbacks is False
    assert catalyst_lite.autograph_strict_conversion is False
    with pytest.warns(AutoGraphWarning):
        assert float(qjit(autograph=True)(_loop_over_a_python_list)(2.0)) == 12.0


def test_autograph_ignore_fallbacks_silences_the_warning(monkeypatch):
    monkeypatch.setattr(catalyst_lite, "autograph_ignore_fallbacks", True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(qjit(autograph=True)(_loop_over_a_python_list)(2.0)) == 12.0


def test_autograph_strict_conversion_raises(monkeypatch):
    """Catalyst then raises the loop's error instead of falling back to Python."""
    monkeypatch.setattr(catalyst_lite, "autograph_strict_conversion", True)
    with pytest.raises(catalyst_lite.AutoGraphError, match="for"):
        qjit(autograph=True)(_loop_over_a_python_list)(2.0)


def test_measure_outside_a_qnode_is_catalysts_compile_error():
    """Catalyst raises ``CompileError`` for ``measure`` outside qjit and outside a QNode."""
    with pytest.raises(CompileError, match="can only be used from within @qjit"):
        catalyst_lite.measure(0)
    with pytest.raises(CompileError, match="can only be used from within a qp.qnode"):
        qjit(lambda x: catalyst_lite.measure(0))(1.0)


@pytest.mark.parametrize("wires, postselect, error, phrase", [
    ([0, 1], None, TypeError, "Only one element is supported for the 'wires' parameter"),
    (jnp.array([0, 1]), None, TypeError, r"Measure is only supported on 1 qubit, got array of shape \(2,\)"),
    (0, -1, TypeError, "postselect must be '0' or '1', got -1"),
])
def test_measure_arguments_are_checked_with_catalysts_phrases(wires, postselect, error, phrase):
    import pennylane as qml

    def circuit():
        qml.X(0)
        return catalyst_lite.measure(wires, postselect=postselect)

    with pytest.raises(error, match=phrase):
        qjit(qml.qnode(qml.device("default.qubit", wires=2))(circuit))()


@pytest.mark.parametrize("statistic", ["sample", "counts"])
def test_samples_without_shots_are_rejected_as_catalyst_and_default_qubit_do(statistic):
    import pennylane as qml

    circuit = qml.qnode(qml.device("default.qubit", wires=1))(lambda: getattr(qml, statistic)(wires=0))
    with pytest.raises(qml.exceptions.DeviceError):
        circuit()
    with pytest.raises(CompileError, match=f"qml.{statistic} cannot work with shots=None"):
        qjit(circuit)  # traced when decorated: the function has no parameters


def test_measure_takes_a_one_element_list_or_array_of_a_wire():
    import pennylane as qml

    for wires in ([1], jnp.array([1]), jnp.array(1)):
        circuit = qml.qnode(qml.device("default.qubit", wires=2))(lambda w: (qml.X(1), catalyst_lite.measure(w))[1])
        assert bool(qjit(circuit)(wires)) is True


def test_quantum_errors_have_catalysts_classes():
    """Catalyst 0.15: an unsupported measurement is a ``CompileError``, a wire beyond the device's
    a ``RuntimeError`` (from its runtime). catalyst_lite raises them when tracing, with those
    classes among their bases."""
    import pennylane as qml

    dev = qml.device("lightning.qubit", wires=2)
    shadow = qml.qnode(dev, shots=10)(lambda x: (qml.RY(x, 0), qml.classical_shadow(wires=[0]))[1])
    with pytest.raises(CompileError, match="ClassicalShadowMP"):
        qjit(shadow)(0.3)
    beyond = qml.qnode(dev)(lambda x: (qml.RY(x, 5), qml.expval(qml.Z(0)))[1])
    with pytest.raises(RuntimeError, match="wire 5"):
        qjit(beyond)(0.3)


def test_qjit_constructed_from_a_compile_options_record():
    """Catalyst's ``QJIT(fn, CompileOptions(...))``."""
    f = catalyst_lite.QJIT(lambda x, n: jnp.ones(n) * x, CompileOptions(static_argnums=1, seed=5))
    np.testing.assert_array_equal(f(2.0, 3), np.full(3, 2.0))
    assert f.compile_options.static_argnums == (1,) and f.compile_options.seed == 5
    with pytest.raises(TypeError, match="CompileOptions"):
        catalyst_lite.QJIT(doubled, {"static_argnums": 1})


def test_unequal_lengths_of_a_shared_abstracted_axis():
    """Catalyst raises a ``TypeError``; catalyst_lite's error is also a ``ValueError``."""
    f = qjit(lambda a, b: a + b, abstracted_axes={0: "n"})
    np.testing.assert_array_equal(f(np.ones(3), np.arange(3.0)), np.arange(3.0) + 1.0)
    for error in (TypeError, ValueError):
        with pytest.raises(error, match="abstracted axis 'n' is shared by argument 'a'.*'b'"):
            f(np.ones(3), np.ones(4))


def test_qjit_of_a_transformed_annotated_function_compiles_at_decoration():
    """``qjit(grad(f))`` sees ``f``'s parameters: annotated, it is traced when decorated (and
    its errors raised there), as Catalyst does; ``static_argnames`` name ``f``'s parameters."""
    def f(x: float):
        return jnp.sin(x) * x

    g = qjit(catalyst_lite.grad(f))
    assert g.jaxpr is not None
    np.testing.assert_allclose(g(0.7), jax.grad(f)(0.7))

    @catalyst_lite.pure_callback
    def host(x) -> float:
        return x

    host.fwd(lambda x: (host(x), None))  # no .bwd
    with pytest.raises(catalyst_lite.DifferentiableCompileError, match="missing reverse pass"):
        qjit(catalyst_lite.grad(_annotated(host)))  # raised by the decorator: no call
    h = qjit(catalyst_lite.value_and_grad(lambda x, k: x * k), static_argnames="k")
    assert h.compile_options.static_argnums == (1,)
    assert [float(v) for v in h(2.0, 3)] == [6.0, 3.0]


def _annotated(host):
    def through(x: float):
        return host(x)

    return through


def test_catalysts_exceptions_module_path():
    from catalyst_lite.utils.exceptions import CompileError as C, DifferentiableCompileError as D

    assert C is catalyst_lite.CompileError and D is catalyst_lite.DifferentiableCompileError


@pytest.mark.parametrize("resize", [False, True])
def test_loop_equations_count_implicit_inputs_with_catalysts_parameter_name(resize):
    """A loop in ``QJIT.jaxpr`` names its count of carried sizes ``num_implicit_inputs``, as
    Catalyst 0.15's jaxpr does (0 when the carried shapes are preserved); the program's result is
    Python's."""
    from catalyst_lite import for_loop, while_loop

    def f(x, n: int):
        @for_loop(0, n, 1, allow_array_resizing=resize)
        def grow(i, v):
            return jnp.append(v, i) if resize else v + i

        @while_loop(lambda v: v.size < 6 if resize else v[0] < 10.0, allow_array_resizing=resize)
        def more(v):
            return jnp.append(v, 1.0) if resize else v + 1.0

        return more(grow(x))

    x, n = np.array([1.5]), 3
    v = x
    for i in range(n):
        v = np.append(v, i) if resize else v + i
    while (v.size < 6) if resize else (v[0] < 10.0):
        v = np.append(v, 1.0) if resize else v + 1.0
    compiled = qjit(f, abstracted_axes={0: "m"} if resize else None)
    np.testing.assert_allclose(compiled(x, n), v)
    loops = {e.primitive.name: e.params for e in compiled.jaxpr.jaxpr.eqns if "loop" in e.primitive.name}
    assert set(loops) == {"for_loop", "while_loop"}
    for params in loops.values():
        assert "nimplicit" not in params and params["num_implicit_inputs"] == int(resize)
    assert compiled.mlir.count("stablehlo.while") >= 2  # the loops lower with the renamed parameter
