"""Shared by the Python tests: the command line to compare with, fresh random data, a CPU session."""

import json
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

import twobs

ROOT = Path(__file__).resolve().parents[2]


def twobs_binary() -> Path:
    """The command line built beside the package (scripts/test.sh builds it first)."""
    given = os.environ.get("TWOBS_BIN")
    path = Path(given) if given else ROOT / "target" / "debug" / "twobs"
    if not path.exists():
        raise RuntimeError(f"{path} is missing: build the command line first (cargo build), or set TWOBS_BIN")
    return path


class Cli:
    """Runs `twobs` in a temporary folder on arrays written as .npy files."""

    def __init__(self, folder: Path):
        self.folder = folder

    def npy(self, name: str, array: np.ndarray) -> str:
        path = self.folder / f"{name}.npy"
        np.save(path, array)
        return str(path)

    def run(self, *args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([str(twobs_binary()), *args], cwd=self.folder, capture_output=True, text=True)
        if done.returncode != 0:
            raise AssertionError(f"twobs {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done

    def report(self, *args: str) -> dict:
        """The JSON report of `twobs run ARGS` on the CPU backend."""
        report = self.folder / "report.json"
        self.run("run", *args, "--backend", "cpu", "--quiet", "--report", str(report))
        return json.loads(report.read_text())


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


@pytest.fixture
def rng(request) -> np.random.Generator:
    """Random data drawn fresh each run; the seed is in the test's name on failure."""
    seed = int.from_bytes(os.urandom(4), "little")
    request.node.user_properties.append(("seed", seed))
    print(f"seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(scope="session")
def cpu() -> twobs.Session:
    return twobs.Session(backend="cpu")


@pytest.fixture
def ctrl_c():
    """Ctrl-C as Python handles it by default, for the tests that press it:
    a process started in the background by a shell without job control
    ignores SIGINT, and `_thread.interrupt_main` then does nothing (every
    Ctrl-C test failed "DID NOT RAISE" in a suite started that way)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)

