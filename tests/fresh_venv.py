"""DSMO's wheel, built from a copy of the sources and installed into a fresh virtualenv.

The virtualenv holds the wheel and nothing else of DSMO: no editable finder, no repository on
`sys.path`. Its third-party dependencies are the suite's own (same pinned ranges, already
installed), reached through a `.pth` line, because the machine that runs the suite may have no
package index; `.pth` files in that folder are not processed, so the suite's editable `dsmo` does
not come along, and `importlib.metadata` lists the wheel's distribution first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dsmo.config.settings import Settings
from dsmo.runtime.provisioning import worker_polling

REPO = Path(__file__).resolve().parents[1]


def source_copy(target: Path) -> Path:
    """The package's files: building in the repository would leave `build/` and a `dsmo.egg-info`
    whose stale metadata (entry points) shadows the installed one."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, target / name)
    shutil.copytree(REPO / "dsmo", target / "dsmo", ignore=shutil.ignore_patterns("__pycache__"))
    return target


def build_wheel(workdir: Path) -> Path:
    """Build DSMO's wheel offline (no build isolation) into `workdir`; returns its path."""
    source = source_copy(workdir / "source")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(workdir), source],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = workdir.glob("dsmo-*.whl")
    return wheel


@dataclass(frozen=True)
class FreshVenv:
    """A virtualenv with DSMO's wheel installed."""

    root: Path

    def bin(self, name: str) -> str:
        return str(self.root / "bin" / name)

    @property
    def site_packages(self) -> Path:
        (folder,) = (self.root / "lib").glob("python3.*/site-packages")
        return folder

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a process run in it: no PYTHONPATH, its bin first on PATH."""
        env = {key: value for key, value in os.environ.items() if key not in {"PYTHONPATH", "VIRTUAL_ENV"}}
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.root)
        return {**env, **(extra or {})}

    def run(
        self, *argv: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` (its first word looked up in the virtualenv's bin) and return the result."""
        return subprocess.run(
            [self.bin(argv[0]), *argv[1:]],
            cwd=cwd,
            env=self.env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def pip_install(self, *args: str, cwd: Path) -> None:
        """Install into this virtualenv with the suite's pip, offline and without dependencies."""
        pip = [sys.executable, "-m", "pip", "--python", self.bin("python"), "install", "-q"]
        done = subprocess.run(
            [*pip, "--no-deps", "--no-build-isolation", "--no-index", *args],
            cwd=cwd,
            env=self.env(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    @contextlib.contextmanager
    def worker(self, settings: Settings, *args: str, cwd: Path, env: dict[str, str], log: Path) -> Iterator[None]:
        """`dsmo worker ARGS` from this virtualenv, polling ``settings.temporal.task_queue`` until the block
        ends; its output goes to ``log``, shown if it stops before polling."""
        with polling_worker([self.bin("dsmo"), "worker", *args], settings, env=self.env(env), log=log, cwd=cwd):
            yield


@contextlib.contextmanager
def polling_worker(
    command: list[str], settings: Settings, *, env: dict[str, str], log: Path, cwd: Path | None = None
) -> Iterator[None]:
    """A worker process started with ``command``, polling ``settings.temporal.task_queue`` until the
    block ends; its output goes to ``log``, shown if it stops before polling."""
    with log.open("w") as sink:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not asyncio.run(worker_polling(settings, process.pid)):
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "the worker did not start polling"
            time.sleep(0.3)
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)


def create(root: Path, wheel: Path) -> FreshVenv:
    """A new virtualenv at `root` with `wheel` installed and the suite's dependencies visible."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    venv = FreshVenv(root)
    (venv.site_packages / "suite-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    venv.pip_install(str(wheel), cwd=root)
    return venv
