"""The package as installed: its version, its metadata files, and the clear ImportError that an
unsupported JAX gets at ``import catalyst_lite``."""

import os
import pathlib
import subprocess
import sys
import tomllib

import catalyst_lite
from catalyst_lite.versions import SUPPORTED_JAX, unsupported_jax

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_version_matches_pyproject():
    assert catalyst_lite.__version__ == PYPROJECT["version"]


def test_license_and_typing_marker_ship():
    assert PYPROJECT["license"] == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert (pathlib.Path(catalyst_lite.__file__).parent / "py.typed").exists()


def test_pinned_jax_is_supported():
    """The JAX a fresh install resolves is one catalyst_lite accepts (and the first one: capture's)."""
    pins = [d for d in PYPROJECT["dependencies"] if d.startswith(("jax==", "jaxlib=="))]
    assert sorted(pins) == [f"jax=={SUPPORTED_JAX[0]}", f"jaxlib=={SUPPORTED_JAX[0]}"]


def test_supported_versions_pass():
    for v in SUPPORTED_JAX:
        assert unsupported_jax({"jax": v, "jaxlib": v}) is None


def test_unsupported_jax_is_one_clear_import_error(tmp_path):
    """A newer JAX (only its metadata: the version is read before JAX is imported) is refused at
    import with the installed and supported versions and the command that fixes it."""
    info = tmp_path / "jax-0.12.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jax\nVersion: 0.12.0\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    run = subprocess.run(
        [sys.executable, "-c", "import catalyst_lite"], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: catalyst_lite needs JAX 0.7.1 or 0.7.2")
    assert "found jax 0.12.0, jaxlib " in last and "pip install 'jax==0.7.1' 'jaxlib==0.7.1'" in last
    assert "Traceback" in run.stderr and "jax._src" not in run.stderr  # JAX was never imported
