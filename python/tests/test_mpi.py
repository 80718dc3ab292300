"""`comm=`: an mpi4py communicator shares a run between MPI ranks (issue 34).

Every function run by `mpiexec -n 1, 2, 4` (mpi_worker.py) gives what one
process gives on the same fresh random points, bit for bit: histograms,
counts and sums on every rank, pairs and KNN lists on rank 0 (None on the
others); a split of the world runs each half's own problem; ranks given
other points refuse. These need the package built with its `mpi` feature
and mpi4py built against the same MPI (`scripts/test-python.sh --mpi`);
a package without MPI refuses `comm=` with a message that says how to build it.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import twobs

WORKER = Path(__file__).with_name("mpi_worker.py")

needs_mpi = pytest.mark.skipif(
    not twobs.MPI, reason="this build of twobs has no MPI (scripts/test-python.sh --mpi builds it with its mpi feature)"
)


@pytest.mark.skipif(twobs.MPI, reason="this build has MPI: the refusal is a build without it's")
def test_a_package_without_mpi_refuses_comm_and_says_how_to_build_one():
    with pytest.raises(twobs.Error, match=r"built without MPI.*--features mpi"):
        twobs.Session(comm=object())
    with pytest.raises(twobs.Error, match="built without MPI"):
        twobs.query_pairs(np.zeros((3, 3), np.float32), 0.1, comm=object())


@needs_mpi
def test_comm_must_be_an_mpi4py_intracommunicator():
    with pytest.raises(twobs.InputError, match="expected an mpi4py intracommunicator"):
        twobs.Session(comm=object())


def _mpiexec() -> str:
    found = shutil.which("mpiexec")
    assert found, "mpiexec is not on the PATH: run scripts/install-mpi.sh"
    return found


def _ranks(folder: Path, ranks: int, mode: str) -> list[dict]:
    """mpi_worker.py in `mode` under `mpiexec -n ranks`: what each rank wrote."""
    for old in folder.glob("rank*.npz"):
        old.unlink()  # an earlier run's file would pass for this one's
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [_mpiexec(), "-n", str(ranks), sys.executable, str(WORKER), str(folder), mode],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert done.returncode == 0, f"mpiexec -n {ranks} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    out = []
    for r in range(ranks):
        with np.load(folder / f"rank{r}.npz") as z:
            out.append({k: z[k] for k in z.files})
        assert "error" not in out[-1] or mode != "same", f"rank {r}: {out[-1]['error']}"
    return out


def _write_inputs(folder: Path, rng: np.random.Generator) -> dict:
    inputs = {
        "p": rng.random((1500, 3), dtype=np.float32),
        "q": rng.random((900, 3), dtype=np.float32),
        "w": rng.random(1500) + 0.5,
        "r": rng.random((1200, 3), dtype=np.float32),
        "edges": np.linspace(0.0, 0.15, 16),
        "half0": rng.random((800, 3), dtype=np.float32),
        "half1": rng.random((700, 3), dtype=np.float32),
    }
    for name, a in inputs.items():
        np.save(folder / f"{name}.npy", a)
    return inputs


def _one_process(x: dict) -> dict:
    """The same cases in this process, without MPI."""
    p, q, w, r, edges = x["p"], x["q"], x["w"], x["r"], x["edges"]
    want = {}
    rdf = twobs.RDF(bins=30, r_max=0.2)
    rdf.compute(1.0, p)
    rdf.compute(1.0, q, reset=False)
    want["rdf_counts"], want["rdf"] = rdf.bin_counts, rdf.rdf
    dd = twobs.DD(1, 0, edges, p[:, 0], p[:, 1], p[:, 2], weights1=w, periodic=False)
    want["dd_npairs"], want["dd_weightavg"] = dd["npairs"], dd["weightavg"]
    xi = twobs.xi(p, r, edges)
    want["xi"], want["xi_dr"] = xi["xi"], xi["dr"]
    want["pairs"] = twobs.query_pairs(p, 0.05)
    want["knn_dist"], want["knn_ids"] = twobs.knn(p, 4, query=q)
    cpu = twobs.Session(backend="cpu")
    want["kde"] = np.array([cpu.run("kde", p, f64=True).sum])
    want["sdh"] = cpu.run("sdh", q).counts
    want["split"] = [cpu.run("sdh", x["half0"]).counts, cpu.run("sdh", x["half1"]).counts]
    return want


# Pairs and KNN lists: rank 0 alone holds them.
ON_RANK_0 = {"pairs", "knn_dist", "knn_ids"}


@needs_mpi
def test_every_function_on_1_2_and_4_ranks_gives_one_process_results(tmp_path: Path, rng):
    x = _write_inputs(tmp_path, rng)
    want = _one_process(x)
    assert len(want["pairs"]) > 100, "too few pairs to tell an order"
    for ranks in (1, 2, 4):
        got = _ranks(tmp_path, ranks, "same")
        for r, mine in enumerate(got):
            assert list(mine["session"]) == [r, ranks, r, ranks]
            for name, value in want.items():
                if name == "split":
                    if ranks >= 2:
                        assert np.array_equal(mine["split"], value[r % 2]), f"split on rank {r} of {ranks}"
                    continue
                if r > 0 and name in ON_RANK_0:
                    assert name in mine["none"], f"{name} on rank {r} of {ranks}: expected None"
                    continue
                # Bit for bit (NaN where rr is 0 in both).
                assert np.array_equal(mine[name], value, equal_nan=value.dtype.kind == "f"), (
                    f"{name} on rank {r} of {ranks} differs from one process"
                )
        # Rank 0's report says what each rank did: their pairs add up to all of them.
        shares = got[0]["sdh_rank_pairs"]
        assert len(shares) == ranks and int(shares.sum()) == 900 * 899 // 2, shares
        # What each rank held of the points, measured: all of them (900 x 3 float32), not its share.
        assert list(got[0]["sdh_rank_input_bytes"]) == [900 * 3 * 4] * ranks


@needs_mpi
def test_ranks_given_other_points_refuse_and_name_the_rank(tmp_path: Path, rng):
    _write_inputs(tmp_path, rng)
    for r, mine in enumerate(_ranks(tmp_path, 2, "differ")):
        said = str(mine["error"])
        assert "rank 0 has inputs 1500 points" in said and "but rank 1 has inputs 1500 points" in said, (r, said)



@needs_mpi
def test_a_rank_whose_points_are_refused_tells_the_others_instead_of_leaving_them_waiting(tmp_path: Path, rng):
    _write_inputs(tmp_path, rng)
    for r, mine in enumerate(_ranks(tmp_path, 2, "nan")):
        said = str(mine["error"])
        assert "but rank 1 has an error" in said and "row 17 (counting from 0) holds NaN" in said, (r, said)


@needs_mpi
def test_a_communicator_of_another_mpi_or_of_another_size_is_refused_before_use(tmp_path: Path):
    (mine,) = _ranks(tmp_path, 1, "handles")
    assert "another MPI library" in str(mine["library"]) and "Open MPI v5.0.3" in str(mine["library"]), mine
    assert "reads as rank 0 of 1" in str(mine["size"]) and "rank 0 of 2" in str(mine["size"]), mine
