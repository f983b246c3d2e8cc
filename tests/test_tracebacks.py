"""An error raised by the user's code inside a qjit function shows the user's frames, with at most
two of catalyst_lite's (as jax.jit filters its own); CATALYST_LITE_TRACEBACK_FILTERING=off keeps
them all."""

import os
import traceback

import jax.numpy as jnp
import pytest

import catalyst_lite
from catalyst_lite import for_loop, qjit
from catalyst_lite.diagnostics import FILTERING_ENV_VAR

PACKAGE = os.path.dirname(catalyst_lite.__file__)


def helper(x):
    raise ValueError("bad value from the user's code")


def program(x):
    @for_loop(0, 3, 1)
    def body(i, y):
        return helper(y)

    return body(x)


def frames(error: BaseException) -> list[tuple[str, str]]:
    return [(f.filename, f.name) for f in traceback.extract_tb(error.__traceback__)]


def raised(call) -> BaseException:
    with pytest.raises(ValueError, match="bad value from the user's code") as info:
        call()
    return info.value


def test_user_error_shows_the_users_frames_and_at_most_two_of_ours():
    f = qjit(program, abstracted_axes={0: "n"})
    stack = frames(raised(lambda: f(jnp.ones(3))))
    ours = [name for filename, name in stack if filename.startswith(PACKAGE)]
    users = [name for filename, name in stack if filename == __file__]
    assert len(ours) <= 2, stack
    assert users == ["raised", "<lambda>", "program", "body", "helper"]  # in call order
    assert stack[0][0] == __file__  # the user's frames first
    assert not any("/jax/" in filename for filename, _ in stack)


def test_decoration_time_trace_and_lower_are_filtered_too():
    def annotated(x: float):
        return helper(x)

    stack = frames(raised(lambda: qjit(annotated)))
    assert sum(f.startswith(PACKAGE) for f, _ in stack) <= 2 and stack[-1][1] == "helper"
    stack = frames(raised(lambda: qjit(program, abstracted_axes={0: "n"}).lower(jnp.ones(2))))
    assert sum(f.startswith(PACKAGE) for f, _ in stack) <= 2 and stack[-1][1] == "helper"


def test_filtering_off_keeps_every_frame(monkeypatch):
    monkeypatch.setenv(FILTERING_ENV_VAR, "off")
    f = qjit(program, abstracted_axes={0: "n"})
    stack = frames(raised(lambda: f(jnp.ones(3))))
    assert sum(f.startswith(PACKAGE) for f, _ in stack) > 5
