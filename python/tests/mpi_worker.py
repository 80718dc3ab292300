"""One rank of `mpiexec -n R python mpi_worker.py FOLDER MODE` (test_mpi.py starts it).

Reads the points test_mpi.py wrote in FOLDER, runs every function with
``comm=MPI.COMM_WORLD`` and writes what this rank got to FOLDER/rank<r>.npz
(``None`` results are left out and listed in ``none``). MODE ``same`` runs
the cases; ``differ`` gives each rank other points, which must be refused
(``nan``: one rank's points are refused, and the others hear why);
``handles`` hands the engine a communicator with another MPI library's name,
and with a size that is not its own, which must be refused before use.
"""

import json
import sys
import traceback
from pathlib import Path

import numpy as np
from mpi4py import MPI

import twobs

CASES = ("rdf", "dd", "xi", "pairs", "knn", "kde", "split")


def cases(folder: Path, comm) -> dict:
    load = lambda name: np.load(folder / f"{name}.npy")  # noqa: E731
    p, q, w, r = load("p"), load("q"), load("w"), load("r")
    edges = load("edges")
    got: dict = {}
    rdf = twobs.RDF(bins=30, r_max=0.2, comm=comm)
    rdf.compute(1.0, p)
    rdf.compute(1.0, q, reset=False)
    got["rdf_counts"], got["rdf"] = rdf.bin_counts, rdf.rdf
    dd = twobs.DD(1, 0, edges, p[:, 0], p[:, 1], p[:, 2], weights1=w, periodic=False, comm=comm)
    got["dd_npairs"], got["dd_weightavg"] = dd["npairs"], dd["weightavg"]
    x = twobs.xi(p, r, edges, comm=comm)
    got["xi"], got["xi_dr"] = x["xi"], x["dr"]
    got["pairs"] = twobs.query_pairs(p, 0.05, comm=comm)
    got["knn_dist"], got["knn_ids"] = twobs.knn(p, 4, query=q, comm=comm)
    session = twobs.Session(backend="cpu", comm=comm)
    kde = session.run("kde", p, f64=True)
    got["kde"] = np.array([kde.sum])
    sdh = session.run("sdh", q)
    got["sdh"] = sdh.counts
    mpi = sdh.report["mpi"]
    got["sdh_rank_pairs"] = np.array([int(k["pairs"]) for k in mpi["ranks"]], dtype=np.uint64)
    got["sdh_rank_input_bytes"] = np.array([int(k["input_bytes"]) for k in mpi["ranks"]], dtype=np.uint64)
    got["session"] = np.array([session.rank, session.size, mpi["rank"], mpi["size"]])
    # A split of the world: each half shares its own run, on its own points.
    if comm.Get_size() >= 2:
        colour = comm.Get_rank() % 2
        half = comm.Split(colour, comm.Get_rank())
        got["split"] = twobs.Problem("sdh").run(load(f"half{colour}"), comm=half).counts
    return got


def main() -> None:
    folder, mode = Path(sys.argv[1]), sys.argv[2]
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    out: dict = {}
    try:
        if mode == "same":
            got = cases(folder, comm)
            out = {k: v for k, v in got.items() if v is not None}
            out["none"] = np.array(sorted(k for k, v in got.items() if v is None))
        elif mode == "differ":
            p = np.load(folder / "p.npy") + np.float32(rank * 1e-3)
            twobs.Problem("sdh").run(p, comm=comm)
            out["error"] = np.array("no error")
        elif mode == "nan":
            p = np.load(folder / "p.npy")
            if rank == 1:
                p[17, 1] = np.nan
            twobs.Problem("sdh").run(p, comm=comm)
            out["error"] = np.array("no error")
        else:
            handle, size, library = comm.py2f(), comm.Get_size(), MPI.Get_library_version()
            for name, args in (("library", (handle, rank, size, "Open MPI v5.0.3")), ("size", (handle, rank, size + 1, library))):
                try:
                    twobs._twobs.Session(comm=args)
                    out[name] = np.array("no error")
                except twobs.Error as e:
                    out[name] = np.array(str(e))
    except twobs.Error as e:
        out["error"] = np.array(str(e))
    except Exception:
        out["error"] = np.array(traceback.format_exc())
    np.savez(folder / f"rank{rank}.npz", **out)
    (folder / f"rank{rank}.done").write_text(json.dumps({"rank": rank, "size": comm.Get_size()}))


if __name__ == "__main__":
    main()
