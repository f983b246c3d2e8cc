"""Faults injected into the persistent cache (``compiler/disk_cache.py``) and what each one does.

An entry of the cache holds native code the process runs (IREE's modules), so every fault must end
as a ``CacheWarning``, the entry removed and the program compiled again: never a crash, a wrong
result or code someone else planted running. The checks of the directory and of the entries' headers
run without IREE; the end-to-end faults (``needs_iree``) load the faulty entries in subprocesses, where
a crash would show as an exit status, and compare every result with NumPy.
"""

import hashlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

from catalyst_lite.compiler import disk_cache, iree_backend
from catalyst_lite.compiler.disk_cache import CACHE_DIR_ENV_VAR, _file_name, _full_key
from catalyst_lite.compiler.options import ExecutableCache
from catalyst_lite.errors import CacheWarning

if iree_backend.available():
    from iree.compiler.tools import core as iree_compiler_tools

needs_iree = pytest.mark.skipif(not iree_backend.available(), reason="IREE is not installed")
FRONTEND = str(Path(__file__).resolve().parents[1] / "frontend")
KEY = {"program": "0" * 64, "iree": "test"}
CONTENT = bytes(range(256)) * 40


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache directory, configured for this process (not created yet)."""
    directory = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_ENV_VAR, str(directory))
    return directory


def entry_path(directory: Path, key=KEY, kind="vmfb") -> Path:
    return directory / _file_name(_full_key(key, kind))


def read_quietly(key=KEY, kind="vmfb"):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails
        return disk_cache.read(key, kind)


# --- the directory ---------------------------------------------------------------------------------


def test_the_directory_is_created_private_and_entries_round_trip(cache):
    disk_cache.write(KEY, "vmfb", CONTENT)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert read_quietly() == CONTENT
    assert read_quietly(kind="unsupported") is None
    assert read_quietly({**KEY, "program": "1" * 64}) is None
    assert [p.name for p in cache.iterdir()] == [entry_path(cache).name]  # no temporary file left


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_a_directory_others_can_write_is_refused(cache, mode):
    cache.mkdir()
    cache.chmod(mode)
    with pytest.warns(CacheWarning, match="writable by other users.*memory only"):
        disk_cache.write(KEY, "vmfb", CONTENT)
    assert list(cache.iterdir()) == []
    cache.chmod(0o700)
    disk_cache.write(KEY, "vmfb", CONTENT)
    cache.chmod(mode)  # an entry written before is not read from it either
    with pytest.warns(CacheWarning, match="writable by other users"):
        assert disk_cache.read(KEY, "vmfb") is None


def test_a_directory_owned_by_another_user_is_refused(cache):
    cache.mkdir(mode=0o700)
    if os.geteuid() == 0:
        os.chown(cache, 65534, 65534)  # nobody's
    else:
        pytest.skip("needs to give a directory away (root)")
    with pytest.warns(CacheWarning, match="not by you"):
        assert disk_cache.read(KEY, "vmfb") is None


def test_a_directory_that_cannot_be_made_is_refused(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(CACHE_DIR_ENV_VAR, str(tmp_path / "file" / "cache"))
    with pytest.warns(CacheWarning, match="not usable"):
        disk_cache.write(KEY, "vmfb", CONTENT)


def test_a_remote_jax_cache_directory_is_no_local_directory(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_DIR_ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    previous = jax.config.jax_compilation_cache_dir
    try:
        jax.config.update("jax_compilation_cache_dir", "gs://bucket/jax-cache")
        assert disk_cache.cache_dir() is None
        disk_cache.write(KEY, "vmfb", CONTENT)
        assert list(tmp_path.iterdir()) == []  # no `gs:` directory made here
        jax.config.update("jax_compilation_cache_dir", str(tmp_path / "jax"))
        assert disk_cache.cache_dir() == tmp_path / "jax" / "catalyst_lite"
    finally:
        jax.config.update("jax_compilation_cache_dir", previous)


# --- faulty entries --------------------------------------------------------------------------------


def _truncated(data: bytes, at: int) -> bytes:
    return data[:at]


def _flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x10]) + data[at + 1:]


def _header_end(data: bytes) -> int:
    return data.index(b"\n")


FAULTS = {
    "empty": lambda d: b"",
    "truncated in the header": lambda d: _truncated(d, _header_end(d) // 2),
    "truncated after the header": lambda d: _truncated(d, _header_end(d) + 1),
    "truncated in the content": lambda d: _truncated(d, len(d) - 100),
    "one byte more": lambda d: d + b"\0",
    "bit flipped in the header's JSON": lambda d: _flipped(d, 0),
    "bit flipped in the key": lambda d: _flipped(d, d.index(b'"program"') + 12),
    "bit flipped in the hash": lambda d: _flipped(d, d.index(b'"sha256"') + 12),
    "bit flipped in the size": lambda d: _flipped(d, d.index(b'"size"') + 8),
    "bit flipped in the first byte of content": lambda d: _flipped(d, _header_end(d) + 1),
    "bit flipped in the last byte": lambda d: _flipped(d, len(d) - 1),
    "no header (raw content)": lambda d: d[_header_end(d) + 1:],
    "header of another format version": lambda d: d.replace(b'"format": 1', b'"format": 9', 1),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_faulty_entry_is_a_warning_and_removed(cache, fault):
    disk_cache.write(KEY, "vmfb", CONTENT)
    path = entry_path(cache)
    path.write_bytes(FAULTS[fault](path.read_bytes()))
    with pytest.warns(CacheWarning, match="is not used: .*removed"):
        assert disk_cache.read(KEY, "vmfb") is None
    assert not path.exists()
    disk_cache.write(KEY, "vmfb", CONTENT)  # compiled again: stored and found
    assert read_quietly() == CONTENT


def test_an_entry_swapped_with_another_keys_is_refused(cache):
    other = {**KEY, "program": "1" * 64}
    disk_cache.write(KEY, "vmfb", CONTENT)
    disk_cache.write(other, "vmfb", b"another program")
    shutil.copy(entry_path(cache, other), entry_path(cache))  # a valid entry, under the wrong name
    with pytest.warns(CacheWarning, match="written for another key"):
        assert disk_cache.read(KEY, "vmfb") is None
    assert read_quietly(other) == b"another program"
    # An entry of another kind under this kind's name (a failure record as a module) too.
    disk_cache.write(KEY, "unsupported", b"reason")
    shutil.copy(entry_path(cache, kind="unsupported"), entry_path(cache))
    with pytest.warns(CacheWarning, match="written for another key"):
        assert disk_cache.read(KEY, "vmfb") is None


def test_an_entry_of_another_cpu_is_refused(cache):
    """An entry written on a machine with other CPU features (a shared home directory) has another
    name; planted under this machine's name, its header gives it away."""
    full = _full_key(KEY, "vmfb")
    assert full["cpu"] == disk_cache.cpu_features() and full["cpu"]
    other_cpu = {**full, "cpu": full["cpu"] + " avx512_imaginary"}
    assert _file_name(other_cpu) != _file_name(full)
    header = {"format": 1, "key": other_cpu, "size": len(CONTENT), "sha256": hashlib.sha256(CONTENT).hexdigest()}
    cache.mkdir(mode=0o700)
    entry_path(cache).write_bytes(json.dumps(header).encode() + b"\n" + CONTENT)
    with pytest.warns(CacheWarning, match="another key .*CPU"):
        assert disk_cache.read(KEY, "vmfb") is None


@needs_iree
@pytest.mark.parametrize("change", ["another tool", "the tool rebuilt"])
def test_a_module_of_another_iree_compile_is_not_used(cache, tmp_path, monkeypatch, change):
    """The key names the ``iree-compile`` that would run, not only the package's version (which is ""
    for a build from source): another one picked by ``IREE_TOOL_PATH``, or the same one rebuilt,
    misses the modules of the first, on disk and in memory."""
    tools = tmp_path / "tools"
    tools.mkdir()
    tool = tools / "iree-compile"
    tool.write_text(f'#!/bin/sh\nexec "{iree_compiler_tools.find_tool("iree-compile")}" "$@"\n')
    tool.chmod(0o755)
    if change == "the tool rebuilt":
        monkeypatch.setenv("IREE_TOOL_PATH", str(tools))
    first = iree_backend.LoweredProgram("module @program {}", [], [])
    if change == "another tool":
        monkeypatch.setenv("IREE_TOOL_PATH", str(tools))
    else:
        tool.write_text(tool.read_text() + "# rebuilt\n")
    other = iree_backend.LoweredProgram(first.text, [], [])
    assert other.key["program"] == first.key["program"] and other.key != first.key
    disk_cache.write(first.key, "vmfb", CONTENT)
    iree_backend._recent_module(first.digest, CONTENT)
    try:
        assert read_quietly(first.key) == CONTENT
        assert other.cached() is None
    finally:
        iree_backend.forget_compiled()


def test_an_entry_that_is_a_symbolic_link_or_a_directory_is_refused(cache, tmp_path):
    disk_cache.write(KEY, "vmfb", CONTENT)
    target = tmp_path / "elsewhere"
    shutil.move(entry_path(cache), target)
    entry_path(cache).symlink_to(target)
    with pytest.warns(CacheWarning, match="cannot be opened as a file"):
        assert disk_cache.read(KEY, "vmfb") is None
    assert not entry_path(cache).is_symlink() and target.exists()


@pytest.mark.parametrize("make", [os.mkdir, os.mkfifo], ids=["directory", "named pipe"])
def test_an_entry_that_is_not_a_regular_file_is_refused_without_waiting(cache, make):
    """A directory made the read raise (a crash of the call); a named pipe made it wait for a
    writer for ever (the read runs on a thread here, so that the test ends either way)."""
    cache.mkdir(mode=0o700)
    make(entry_path(cache))
    outcome = []

    def read():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outcome.append((disk_cache.read(KEY, "vmfb"), [str(w.message) for w in caught]))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    assert outcome, "the read did not return"
    content, messages = outcome[0]
    assert content is None and any("not a regular file" in m for m in messages)
    assert not os.path.lexists(entry_path(cache))
    disk_cache.write(KEY, "vmfb", CONTENT)
    assert read_quietly() == CONTENT


_KILLED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from catalyst_lite.compiler import disk_cache

    def stop(fd):  # the content is written; the writer is killed before the rename
        print("writing", flush=True)
        time.sleep(600)

    os.fsync = stop
    disk_cache.write({"program": "0" * 64, "iree": "test"}, "vmfb", bytes(range(256)) * 40)
    """
)


def test_a_writer_killed_mid_write_leaves_no_entry_and_its_leftover_is_removed(cache):
    writer = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": FRONTEND})
    try:
        assert writer.stdout.readline().strip() == "writing"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
    leftovers = [p for p in cache.iterdir() if p.name.startswith(disk_cache.TEMP_PREFIX)]
    assert len(leftovers) == 1 and not entry_path(cache).exists()
    assert read_quietly() is None  # no entry: compiled (no warning, nothing removed)
    disk_cache.write(KEY, "vmfb", CONTENT)
    assert leftovers[0].exists()  # a recent temporary file may be another process's write
    past = time.time() - disk_cache.STALE_SECONDS - 1
    os.utime(leftovers[0], (past, past))
    disk_cache.write(KEY, "vmfb", CONTENT)
    assert sorted(p.name for p in cache.iterdir()) == [entry_path(cache).name]
    assert read_quietly() == CONTENT


def test_a_clear_drops_the_executables_of_compilations_started_before_it():
    class Runner:
        forgotten = []

        def forget(self, key):
            self.forgotten.append(key)

    cache, runner = ExecutableCache(4), Runner()
    generation = cache.generation
    cache.added(runner, (3,), generation)
    cache.clear()  # a background compilation for (4,) was running
    cache.added(runner, (4,), generation)
    assert cache.keys() == [] and runner.forgotten == [(3,), (4,)]
    cache.added(runner, (5,), cache.generation)
    assert cache.keys() == [(5,)]


# --- end to end, with IREE: faults in a real module's entry, loaded in subprocesses ---------------

_WORKER = textwrap.dedent(
    """
    import json, logging, sys, warnings
    import jax.numpy as jnp, numpy as np
    from catalyst_lite import QJIT, qjit
    from catalyst_lite.errors import CacheWarning

    warnings.simplefilter("always", CacheWarning)
    unary = {"sin": jnp.sin, "cos": jnp.cos}[sys.argv[1]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CacheWarning)
        f = qjit(lambda x: unary(x) * 2.0 + jnp.sum(x), abstracted_axes={0: "n"}, size_generic=True)
        results = {n: f(np.linspace(0.0, 1.0, n)).tolist() for n in (5, 6)}
        QJIT.wait_for_compilations()
        results[7] = f(np.linspace(0.0, 1.0, 7)).tolist()  # on the size-generic executable
    print(json.dumps({"results": results, "root_handlers": len(logging.root.handlers),
                      "warnings": [str(w.message) for w in caught if w.category is CacheWarning]}))
    """
)


def run_worker(cache_dir: Path, temp_dir: Path, unary: str = "sin", **environment: str) -> dict:
    """Run the program in a new process on ``cache_dir`` (and ``environment``): its report; a crash
    fails the test."""
    env = {**os.environ, "PYTHONPATH": FRONTEND, CACHE_DIR_ENV_VAR: str(cache_dir), "TMPDIR": str(temp_dir),
           "CATALYST_LITE_SIZE_GENERIC": "1", **environment}
    env.pop("IREE_PRESERVE_DYLIB_TEMP_FILES", None)
    done = subprocess.run([sys.executable, "-c", _WORKER, unary], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, f"the process died ({done.returncode}): {done.stderr[-3000:]}"
    assert "leaked" not in done.stderr, done.stderr[-3000:]  # nanobind's report of IREE objects alive at exit
    assert list(temp_dir.iterdir()) == []  # no native code (nor anything else) left in the temp folder
    report = json.loads(done.stdout.strip().splitlines()[-1])
    function = {"sin": np.sin, "cos": np.cos}[unary]
    for n, result in report["results"].items():
        x = np.linspace(0.0, 1.0, int(n))
        np.testing.assert_allclose(result, function(x) * 2.0 + np.sum(x), rtol=1e-12)
    assert report["root_handlers"] == 0
    return report


@pytest.fixture(scope="module")
def good_entries(tmp_path_factory):
    """The cache entries of two programs, compiled by a first process each."""
    if not iree_backend.available():
        pytest.skip("IREE is not installed")
    entries = {}
    for unary in ("sin", "cos"):
        directory = tmp_path_factory.mktemp("cache") / "cache"
        report = run_worker(directory, tmp_path_factory.mktemp("tmp"), unary)
        assert report["warnings"] == []
        (entries[unary],) = [p.read_bytes() for p in directory.glob("*.vmfb")]
    return entries


def _planted_library(directory: Path, marker: Path) -> bytes:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    source = directory / "planted.c"
    source.write_text(
        '#include <stdio.h>\n__attribute__((constructor)) static void planted(void) {\n'
        f'  FILE *f = fopen("{marker}", "w"); if (f) {{ fputs("ran", f); fclose(f); }}\n}}\n'
    )
    library = directory / "planted.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library.read_bytes()


def _header(entry: bytes) -> dict:
    return json.loads(entry.partition(b"\n")[0])


def _with_header(like: bytes, content: bytes) -> bytes:
    """``content`` under the header of the entry ``like``, with the right size and hash (what a
    writer of the directory could make)."""
    header = _header(like)
    header.update(size=len(content), sha256=hashlib.sha256(content).hexdigest())
    return json.dumps(header).encode() + b"\n" + content


def _other_cpu(entry: bytes) -> bytes:
    header, _, content = entry.partition(b"\n")
    header = json.loads(header)
    header["key"]["cpu"] = header["key"]["cpu"].replace("avx2", "avx512_imaginary") + " more"
    return json.dumps(header).encode() + b"\n" + content


END_TO_END = {
    "truncated": (lambda e, d, m: e[: len(e) // 2], "truncated"),
    "bit flipped in the header": (lambda e, d, m: _flipped(e, 10), "not used"),
    "bit flipped in the code": (lambda e, d, m: _flipped(e, len(e) * 3 // 4), "SHA-256"),
    "swapped with another program's": (lambda e, d, m: d["cos"], "another key"),
    "built for another CPU": (lambda e, d, m: _other_cpu(e), "another key"),
    "a planted library": (lambda e, d, m: _planted_library(m.parent, m), "header"),
    "a planted library with a valid header": (lambda e, d, m: _with_header(e, _planted_library(m.parent, m)),
                                              "IREE could not load"),
}


@needs_iree
@pytest.mark.parametrize("fault", END_TO_END)
def test_a_faulty_module_is_a_warning_and_a_recompile_never_a_crash_or_a_wrong_result(
        good_entries, tmp_path, fault):
    make, expected_warning = END_TO_END[fault]
    directory, marker = tmp_path / "cache", tmp_path / "planted-code-ran"
    directory.mkdir(mode=0o700)
    entry = directory / _file_name(_header(good_entries["sin"])["key"])
    entry.write_bytes(make(good_entries["sin"], good_entries, marker))
    (tmp_path / "tmp").mkdir()
    report = run_worker(directory, tmp_path / "tmp")
    assert len(report["warnings"]) == 1 and expected_warning in report["warnings"][0], report["warnings"]
    assert not marker.exists()  # the planted library's constructor never ran
    # Compiled again and stored: a valid entry of this program's key.
    stored = entry.read_bytes()
    assert _header(stored)["key"] == _header(good_entries["sin"])["key"]
    assert _header(stored)["sha256"] == hashlib.sha256(stored.partition(b"\n")[2]).hexdigest()


REFUSED_PROGRAM = """module @program {
  func.func public @main(%arg0: tensor<2xf64>) -> tensor<2xf64> {
    %0 = stablehlo.custom_call @no_such_target(%arg0) : (tensor<2xf64>) -> tensor<2xf64>
    return %0 : tensor<2xf64>
  }
}
"""


@needs_iree
def test_only_a_programs_own_compile_failure_is_remembered(cache, tmp_path, monkeypatch):
    """A program IREE refuses is remembered as refused (no process compiles it again); a program that
    fails only for want of a system linker is not: it compiles once there is one."""
    refused = iree_backend.LoweredProgram(REFUSED_PROGRAM, [], [])
    with pytest.raises(iree_backend.Unsupported, match="no_such_target"):
        refused.compile()
    with pytest.raises(iree_backend.Unsupported, match="no_such_target"):
        iree_backend.LoweredProgram(REFUSED_PROGRAM, [], []).cached()
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    good = iree_backend.LoweredProgram(iree_backend.CANARY_PROGRAM, [], [])
    with pytest.raises(iree_backend.Unsupported):
        good.compile()
    assert good.cached() is None and read_quietly(good.key, "unsupported") is None


@needs_iree
def test_a_compile_failing_for_want_of_a_system_linker_is_not_remembered(tmp_path):
    """Without a system linker on ``PATH`` iree-compile fails whatever the program: that failure was
    stored as the program's, and later processes, with a linker, kept to XLA for good. It is not
    stored (a program known to compile fails too); a process with a linker compiles and stores it."""
    directory, temp = tmp_path / "cache", tmp_path / "tmp"
    temp.mkdir()
    run_worker(directory, temp, PATH=str(tmp_path / "no-tools"))
    assert list(directory.glob("*")) == []
    run_worker(directory, temp)
    assert [p.suffix for p in directory.iterdir()] == [".vmfb"]


@needs_iree
def test_a_planted_library_in_a_directory_others_can_write_is_never_read(good_entries, tmp_path):
    directory, marker = tmp_path / "cache", tmp_path / "planted-code-ran"
    directory.mkdir()
    (directory / _file_name(_header(good_entries["sin"])["key"])).write_bytes(_with_header(good_entries["sin"], _planted_library(tmp_path, marker)))
    directory.chmod(0o777)
    # What a process killed while loading leaves: its native code directory (run_worker checks
    # that the temp folder is empty afterwards).
    dead = subprocess.Popen([sys.executable, "-c", ""])
    dead.wait()
    leftover = tmp_path / "tmp" / f"{iree_backend.NATIVE_CODE_PREFIX}{dead.pid}-abcdefgh"
    leftover.mkdir(parents=True)
    (leftover / "iree_dylib_abcdef_mem_.so").write_bytes(b"native code")
    past = time.time() - disk_cache.STALE_SECONDS - 1
    os.utime(leftover, (past, past))
    report = run_worker(directory, tmp_path / "tmp")
    assert report["warnings"] and all("writable by other users" in w for w in report["warnings"])
    assert not marker.exists()
