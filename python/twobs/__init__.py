"""twobs: exact 2-body statistics on GPUs (and CPUs), from Python.

The engine is the same as the ``twobs`` command line's, and so are the
numbers: g(r) (:class:`RDF`, freud's shape), pair counts (:func:`DD`,
:func:`DDrppi`, :func:`DDsmu`, Corrfunc's shapes), xi (:func:`xi`) and wp(rp) (:func:`wp`), neighbours (:func:`query_pairs`,
:func:`knn`, scipy's shapes), and any spec (:class:`Problem`).

A :class:`Session` keeps, for its life, the backend it runs on; the CUDA
contexts, compiled kernels and CPU drivers of every plan run in the process
stay loaded behind it, so that the second call of a shape costs its compute.
Functions take ``session=``; without it they use :func:`default_session`.

Under MPI (a package built with its ``mpi`` feature), ``Session(comm=comm)``
takes an mpi4py communicator, as TreeCorr's ``process(comm=comm)`` does: every
rank of it calls with the same points, the ranks share the work, and every
rank gets the exact result of one process (histograms, counts and sums), or
rank 0 alone (pairs and KNN lists; ``None`` on the others, as
``comm.gather`` gives). The functions take ``comm=`` too.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Optional, Sequence

import numpy as np

from . import _twobs
from ._twobs import BUILT_IN, MPI, Error, InputError, SpecError

__all__ = [
    "BUILT_IN",
    "DD",
    "DDrppi",
    "DDsmu",
    "Error",
    "InputError",
    "MPI",
    "Problem",
    "RDF",
    "Result",
    "Session",
    "SpecError",
    "default_session",
    "knn",
    "programs",
    "query_pairs",
    "wp",
    "xi",
]


class Result:
    """What one run returned: numpy arrays by what the problem makes, and its report.

    ``kind`` is ``count``, ``sum``, ``histogram``, ``pairs`` or ``knn``;
    histograms have ``edges`` and ``counts`` (or ``sums`` when weighted),
    pairs an (n, 2) ``pairs`` array, KNN ``ids`` and ``values`` of shape
    (queries, k) with -1 where a query has fewer than k partners (``missing``
    counts such queries). Histograms carry ``volume``, what g(r) takes a
    frame's pair density over. Indices are int32 where every index fits (the engine's own
    buffers, handed over without a copy), else int64.
    """

    def __init__(self, raw: dict):
        self._raw = raw
        self.kind: str = raw["kind"]
        self._report: Optional[dict] = None

    def __getattr__(self, name: str) -> Any:
        raw = self.__dict__.get("_raw", {})
        if name in raw:
            return raw[name]
        raise AttributeError(f"a {raw.get('kind', '?')} result has no {name!r}")

    @property
    def report(self) -> dict:
        """The run's report: backend, device, index, schedule, timings, notes."""
        if self._report is None:
            # The engine writes the JSON text when it is first asked for (`str`).
            self._report = json.loads(str(self._raw["report"]))
        return self._report

    @property
    def timings(self) -> dict:
        return self.report["timings"]

    def __repr__(self) -> str:
        shown = {k: (v.shape if isinstance(v, np.ndarray) else v) for k, v in self._raw.items() if k != "report"}
        return f"twobs.Result({shown})"


class Problem(_twobs.Problem):
    """A problem: ``Problem("sdh")`` (a built-in), ``Problem("my.xml")`` (a spec
    file), or ``Problem(spec_text, snippet=cuda_text)``. ``name``, ``summary``,
    ``output``, ``params`` (name, type, default, description), ``dtypes``."""

    def run(self, a: Any, b: Any = None, params: Optional[dict] = None, weights: Optional[Sequence[Any]] = None,
            session: Optional["Session"] = None, comm: Any = None, **options: Any) -> "Result":
        """Runs the problem on set ``a`` (and ``b``) in ``session``, or shared by the
        ranks of ``comm`` (see :meth:`Session.run` and :class:`Session`)."""
        return _session(session, comm).run(self, a, b, params=params, weights=weights, **options)


def _device_of(x: Any) -> Optional[str]:
    """The array library of an array on a GPU (cupy, torch, jax, numba), else None."""
    kind = type(x).__module__.split(".")[0]
    if kind in ("cupy", "numba"):
        return kind
    if kind == "torch" and getattr(x, "is_cuda", False):
        return "torch"
    if kind in ("jax", "jaxlib") and any(d.platform == "gpu" for d in getattr(x, "devices", lambda: [])()):
        return "jax"
    return None


def _host(x: Any) -> np.ndarray:
    """A GPU array's values in host memory, where the run needs them there."""
    lib = _device_of(x)
    if lib == "cupy":
        return x.get()
    if lib == "numba":
        return x.copy_to_host()
    if lib is None and _interface(x) is not None:
        raise InputError(
            f"an array in a GPU's memory ({type(x).__name__}, read through __cuda_array_interface__) that this call "
            "needs on the host (weights, ids, a mix of host and GPU sets, or the CPU backend): pass a host array"
        )
    if lib == "torch":
        return x.detach().cpu().numpy()
    if lib == "jax":
        return np.asarray(x)
    return np.asarray(x)


def _interface(x: Any) -> Optional[dict]:
    """An array's ``__cuda_array_interface__``, or None (PyTorch raises for host tensors)."""
    try:
        return getattr(x, "__cuda_array_interface__", None)
    except (AttributeError, RuntimeError, TypeError):
        return None


def _on_gpu(x: Any) -> Optional[tuple]:
    """(array, interface) of an array in a GPU's memory that twobs reads where
    it lies: through ``__cuda_array_interface__`` (CuPy, PyTorch, Numba), or
    for a DLPack array on a CUDA GPU (JAX) through a CuPy or PyTorch view of
    it (no copy); None for any other array."""
    if isinstance(x, (np.ndarray, list, tuple)) or np.isscalar(x):
        return None
    kind = type(x).__module__.split(".")[0]
    if kind == "torch":
        if not getattr(x, "is_cuda", False):
            return None
        import torch

        x = x.detach()
        # PyTorch's interface names no stream: its work on x is waited for here.
        torch.cuda.current_stream(x.device).synchronize()
    if kind in ("jax", "jaxlib") and hasattr(x, "block_until_ready"):
        # JAX computes asynchronously: its work on x is waited for here.
        x.block_until_ready()
    cai = _interface(x)
    if cai is None and hasattr(x, "__dlpack_device__"):
        try:
            device_type = int(x.__dlpack_device__()[0])
        except Exception:
            return None
        if device_type not in (2, 13):  # kDLCUDA, kDLCUDAManaged
            return None
        x = _dlpack_view(x)
        cai = _interface(x)
    return None if cai is None else (x, cai)


def _dlpack_view(x: Any) -> Any:
    """A CuPy (else PyTorch) array over a DLPack array's GPU memory, no copy."""
    try:
        import cupy

        return cupy.from_dlpack(x)
    except ImportError:
        pass
    try:
        import torch

        return torch.from_dlpack(x)
    except ImportError:
        raise InputError(
            f"a {type(x).__name__} on a GPU (DLPack): twobs reads it through CuPy or PyTorch, and neither is "
            "installed; install one, or pass a host array"
        ) from None


def _gpu_arg(cai: dict, problem: "Problem", name: str) -> tuple:
    """An array's ``__cuda_array_interface__`` as the engine takes points on a GPU:
    (address, (rows, components), typestr, strides in bytes or None, stream or None)."""
    if cai.get("mask") is not None:
        raise InputError(f"{name}: a masked GPU array; twobs reads every point")
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    if len(shape) == 1 and len(problem.dtypes) == 1:
        width = np.dtype(cai["typestr"]).itemsize
        strides = (strides[0] if strides else width, width)
        shape = (shape[0], 1)
    if len(shape) != 2:
        raise InputError(f"{name}: an array of shape {shape}; expected (points, coordinates)")
    stream = cai.get("stream")
    return (int(cai["data"][0]), shape, str(cai["typestr"]),
            None if strides is None else (int(strides[0]), int(strides[1])), None if stream is None else int(stream))


def _back_to(lib: Optional[str], like: Any, a: Any) -> Any:
    """`a` on the GPU of `like` where the inputs were there, else as it is: an
    array twobs left on the GPU (`GpuArray`) is read in place, a host one copied up."""
    if isinstance(a, _twobs.GpuArray):
        if lib == "cupy":
            import cupy

            with cupy.cuda.Device(a.device):
                return cupy.asarray(a)
        if lib == "torch":
            import torch

            return torch.as_tensor(a, device=like.device)
        if lib == "numba":
            from numba import cuda

            return cuda.as_cuda_array(a)
        if lib == "jax":
            import jax

            return jax.dlpack.from_dlpack(_dlpack_owner(a))
        return a
    if lib == "numba":
        from numba import cuda

        return cuda.to_device(a)
    if lib == "cupy":
        import cupy

        with cupy.cuda.Device(like.device.id):
            return cupy.asarray(a)
    if lib == "torch":
        import torch

        return torch.as_tensor(a, device=like.device)
    if lib == "jax":
        import jax

        return jax.device_put(a, list(like.devices())[0])
    return a


def _dlpack_owner(a: Any) -> Any:
    """A CuPy (else PyTorch) array over a `GpuArray`, which DLPack consumers take."""
    try:
        import cupy

        with cupy.cuda.Device(a.device):
            return cupy.asarray(a)
    except ImportError:
        import torch

        return torch.as_tensor(a, device=f"cuda:{a.device}")


def _points(x: Any, problem: Problem, name: str) -> np.ndarray:
    """A set of points as the engine takes it: 2-D, of the element's type."""
    a = _host(x)
    if a.ndim == 1 and len(problem.dtypes) == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2:
        raise InputError(f"{name}: an array of shape {a.shape}; expected (points, coordinates)")
    dtype = np.dtype(problem.dtypes[0])
    if a.dtype != dtype:
        if a.dtype.kind == "f" and dtype.kind == "f" and a.dtype.itemsize > dtype.itemsize:
            # As the command line reads a float64 .npy for a float32 spec: rounded to nearest.
            a = a.astype(dtype)
        elif a.dtype.kind in "iu" and dtype.kind == "f":
            a = a.astype(dtype)
        elif a.dtype.kind == dtype.kind and a.dtype.itemsize <= dtype.itemsize:
            a = a.astype(dtype)
        else:
            raise InputError(f"{name}: an array of {a.dtype}, but the spec's points are {dtype}")
    return a


def _weights(w: Any, n: int, name: str) -> np.ndarray:
    w = np.ascontiguousarray(_host(w), dtype=np.float64)
    if w.ndim != 1 or len(w) != n:
        raise InputError(f"{name}: {w.shape} weights for {n} points; give one number per point")
    return w


def _param_text(value: Any) -> str:
    if isinstance(value, (list, tuple, np.ndarray)):
        return ",".join(repr(float(v)) for v in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _comm_args(comm: Any) -> tuple:
    """An mpi4py intracommunicator as the engine takes it: its Fortran handle
    (one integer in every MPI), this rank, the size, and mpi4py's MPI library."""
    if not MPI:
        # Refused before mpi4py is touched: the wheel has no MPI to use it with.
        return (0, 0, 1, "")
    try:
        from mpi4py import MPI as mpi
    except ImportError as e:
        raise Error(f"comm=: mpi4py cannot be imported ({e}); install it against twobs's MPI") from e
    if not isinstance(comm, mpi.Intracomm):
        raise InputError(f"comm={comm!r}: expected an mpi4py intracommunicator (MPI.COMM_WORLD, or one of its splits)")
    if comm == mpi.COMM_NULL:
        raise InputError("comm=MPI.COMM_NULL: this process is in no group of that communicator")
    return (int(comm.py2f()), comm.Get_rank(), comm.Get_size(), mpi.Get_library_version())


class Session:
    """Where runs go and with what: ``backend`` ("auto", "cuda" or "cpu"),
    ``gpus`` (ordinals; all by default), CPU ``threads`` (0: every core),
    ``index`` ("auto", "grid", "none", "cells"), ``verify`` (re-compute on the CPU and
    fail on any difference), ``progress`` (a bar on stderr for long runs).

    ``comm``: an mpi4py communicator whose ranks share every run of the
    session. Making the session and each run are collective: every rank of
    ``comm`` calls them in the same order, with the same points and options
    (the ranks check that their points agree, and refuse to run otherwise).
    Each rank takes pieces of one schedule from a counter on rank 0 (a rank
    that finishes early takes the others' tail); rank 0 merges in one fixed
    order, so results are those of one process bit for bit. Histograms,
    counts and sums come back on every rank; pairs and KNN lists on rank 0
    only (``None`` elsewhere). A GPU run takes each rank's ``gpus``, and every
    rank must see the same kind and number (and the same ``threads`` on the CPU).
    """

    def __init__(
        self,
        backend: str = "auto",
        gpus: Optional[Sequence[int]] = None,
        threads: int = 0,
        streams: int = 2,
        index: str = "auto",
        verify: bool = False,
        progress: bool = False,
        comm: Any = None,
    ):
        # verify re-computes on the CPU backend, from host points.
        self._verify = verify
        self._native = _twobs.Session(
            backend=backend,
            gpus=None if gpus is None else list(gpus),
            threads=threads,
            streams=streams,
            index=index,
            verify=verify,
            progress=progress,
            comm=None if comm is None else _comm_args(comm),
        )

    @property
    def backend(self) -> str:
        """The backend a run starts on now: "cuda" or "cpu"."""
        return self._native.backend

    @property
    def rank(self) -> int:
        """This process's rank among the session's (0 without ``comm``)."""
        return self._native.rank[0]

    @property
    def size(self) -> int:
        """How many ranks share the session's runs (1 without ``comm``)."""
        return self._native.rank[1]

    def run(
        self,
        problem: "Problem | str",
        a: Any,
        b: Any = None,
        params: Optional[dict] = None,
        weights: Optional[Sequence[Any]] = None,
        log_bins: bool = False,
        outside_box: Optional[str] = None,
        f64: bool = False,
        ids: Optional[dict] = None,
        exclude_same: Optional[str] = None,
    ) -> Result:
        """Runs ``problem`` (a :class:`Problem`, a built-in name or a spec path)
        on set ``a`` (and ``b``): arrays of shape (points, coordinates), or a
        list of 1-D columns for a record element. ``params`` maps names to
        values (a box as L, (Lx, Ly, Lz) or (Lx, Ly, Lz, xy, xz, yz)).
        ``ids`` maps an id's name to one integer array per set (the spec's
        ``<id>``); ``exclude_same="molecule"`` leaves out every pair whose
        points share that id (``<exclude same="..."/>``), as
        ``twobs run --exclude-same`` does."""
        if not isinstance(problem, Problem):
            # A built-in's spec is read once (a file of the same name is read each call, as it may change).
            problem = _problem(problem) if problem in _BUILT_IN and not os.path.exists(problem) else Problem(problem)
        sets = [a] if b is None else [a, b]
        gpu = [_on_gpu(s) for s in sets]
        # Under MPI ranks every rank reads host points (their digests are compared), and verify re-computes
        # from them: GPU arrays are copied there.
        plain = (weights is None and not ids and exclude_same is None and outside_box is None and not f64
                 and self.size == 1 and not self._verify)
        # Every set on a GPU: read there, unless the run needs host points and their library can copy them.
        if plain and all(g is not None for g in gpu) and (
                self.backend == "cuda" or all(_device_of(s) is None for s in sets)):
            args = [_gpu_arg(cai, problem, "set A" if k == 0 else "set B") for k, (_, cai) in enumerate(gpu)]
            overrides = [f"{k}={_param_text(v)}" for k, v in (params or {}).items()]
            raw = self._native.run_on_gpu(problem, args[0], args[1] if len(args) > 1 else None,
                                          params=overrides, log_bins=log_bins)
            return Result(raw)
        taken = []
        for k, s in enumerate(sets):
            name = "set A" if k == 0 else "set B"
            if isinstance(s, (list, tuple)):
                if len(s) != len(problem.dtypes):
                    raise InputError(f"{name}: {len(s)} columns, but the spec's element has {len(problem.dtypes)}")
                taken.append([np.ascontiguousarray(_host(c), dtype=np.dtype(t)) for c, t in zip(s, problem.dtypes)])
            else:
                taken.append(_points(s, problem, name))
        overrides = [f"{k}={_param_text(v)}" for k, v in (params or {}).items()]
        ws = []
        if weights is not None:
            ws = [_weights(w, _count(s), f"weights of set {'AB'[k]}") for k, (w, s) in enumerate(zip(weights, taken))]
        id_arrays = []
        for name, arrays in (ids or {}).items():
            if isinstance(arrays, np.ndarray) or not isinstance(arrays, (list, tuple)):
                arrays = [arrays]
            if len(arrays) != len(taken):
                raise InputError(f"ids {name!r}: {len(arrays)} arrays for {len(taken)} set(s); give one per set")
            id_arrays.append((str(name), [_ids(x, _count(s), f"ids {name!r} of set {'AB'[k]}")
                                          for k, (x, s) in enumerate(zip(arrays, taken))]))
        raw = self._native.run(
            problem,
            taken[0],
            taken[1] if len(taken) > 1 else None,
            params=overrides,
            weights=ws,
            log_bins=log_bins,
            outside_box=outside_box,
            f64=f64,
            ids=id_arrays,
            exclude_same=exclude_same,
        )
        return Result(raw)


def _ids(x: Any, n: int, name: str) -> np.ndarray:
    """One int32 id per point."""
    a = np.asarray(_host(x))
    if a.ndim != 1 or len(a) != n:
        raise InputError(f"{name}: shape {a.shape} for {n} points; give one integer per point")
    if a.dtype.kind not in "iu":
        raise InputError(f"{name}: an array of {a.dtype}; ids are integers")
    if len(a) and (a.min() < -(2**31) or a.max() >= 2**31):
        raise InputError(f"{name}: ids must fit int32")
    return np.ascontiguousarray(a, dtype=np.int32)


def _count(s: Any) -> int:
    return len(s[0]) if isinstance(s, list) else s.shape[0]


def programs() -> int:
    """How many distinct generated programs (GPU kernels, CPU drivers, probes)
    this process has compiled or loaded from the disk cache: a trajectory whose
    box changes every frame adds one at its second box (the box is then read at
    run time), not one a frame."""
    return _twobs.programs()


_default: Optional[Session] = None


def default_session() -> Session:
    """The session functions use when given none: the GPU when one is usable, else every CPU core."""
    global _default
    if _default is None:
        _default = Session()
    return _default


# Sessions made for a `comm=` given to a function, by the communicator
# (kept alive here, so that its id stays its own) and the session's options.
_comm_sessions: dict = {}


def _session(session: Optional[Session], comm: Any = None, **options: Any) -> Session:
    if comm is None:
        if session is None and options:
            return Session(**options)
        return session if session is not None else default_session()
    if session is not None:
        raise InputError("give session= or comm=, not both: make the session with Session(comm=comm)")
    key = (id(comm), tuple(sorted(options.items())))
    if key not in _comm_sessions:
        # Collective: every rank makes it at the same call.
        _comm_sessions[key] = (comm, Session(comm=comm, **options))
    return _comm_sessions[key][1]


# ---------------------------------------------------------------- g(r)


def _box_param(box: Any) -> tuple[str, float]:
    """A box as the spec's box parameter takes it, and its volume."""
    if hasattr(box, "Lx") and hasattr(box, "Lz"):  # a freud.box.Box, or anything shaped like one
        if getattr(box, "is2D", False):
            raise InputError("a 2-D box: twobs's g(r) is 3-D")
        values = [box.Lx, box.Ly, box.Lz, box.xy, box.xz, box.yz]
    elif np.ndim(box) == 0:
        values = [float(box)] * 3
    else:
        values = [float(v) for v in np.asarray(box, dtype=float).ravel()]
    if len(values) == 6 and not any(values[3:]):
        values = values[:3]
    if len(values) not in (3, 6):
        raise InputError(f"box {box!r}: expected L, (Lx, Ly, Lz) or (Lx, Ly, Lz, xy, xz, yz)")
    if not all(math.isfinite(v) and v > 0 for v in values[:3]):
        raise InputError(f"box {box!r}: every edge must be positive and finite")
    return ",".join(repr(float(v)) for v in values), values[0] * values[1] * values[2]


class RDF:
    """The radial distribution function g(r), in freud's shape.

    ``RDF(bins, r_max)``; ``compute(box, points, query_points=None, reset=True)``
    (or ``compute((box, points))``), a box per call; ``reset=False`` adds the
    frame to the ones before (NPT trajectories: each frame's own box).
    Results: ``bin_edges``, ``bin_centers``, ``bin_counts`` (as freud counts
    them: each pair once from each end where the points query themselves),
    ``rdf``, ``n_r``. ``normalization_mode`` is freud's: "exact" (N^2 / V)
    or "finite_size" (N (N - 1) / V, the command line's and MDAnalysis's).
    The counts are exact: the same as ``twobs run rdf`` on the same points.

    ``compute(..., molecules=ids, query_molecules=ids_q)`` leaves out every
    pair of points in the same molecule (MDAnalysis's ``exclusion_block``, for
    molecules of any size; ``twobs run --exclude-same molecule``), and takes
    those pairs out of the density too. A partial g(r) between two types is
    ``compute(box, points[types == "O"], points[types == "H"], ...)``.
    """

    def __init__(self, bins: int, r_max: float, r_min: float = 0.0, normalization_mode: str = "exact",
                 session: Optional[Session] = None, comm: Any = None):
        if bins < 1:
            raise InputError(f"bins={bins}: at least 1")
        if not (r_max > 0):
            raise InputError(f"r_max={r_max}: must be positive")
        if r_min != 0:
            raise InputError(f"r_min={r_min}: twobs's g(r) starts at 0 (shells of width r_max / bins)")
        if normalization_mode not in ("exact", "finite_size"):
            raise InputError(f"normalization_mode={normalization_mode!r}: expected 'exact' or 'finite_size'")
        self.bins = int(bins)
        self.r_max = float(r_max)
        self.r_min = 0.0
        self.normalization_mode = normalization_mode
        self._session = session
        self._comm = comm
        self._problem = Problem("rdf")
        self._reset()

    def _reset(self) -> None:
        self._counts = np.zeros(self.bins, dtype=np.uint64)
        self._density = 0.0  # sum over frames of N_points N_query / V (or with N_query - 1)
        self._queries = 0  # sum over frames of N_query
        self._edges: Optional[np.ndarray] = None
        self.frames = 0
        self._result: Optional[Result] = None

    @property
    def report(self) -> Optional[dict]:
        """The last frame's report (None before the first compute)."""
        return None if self._result is None else self._result.report

    def compute(self, box: Any, points: Any = None, query_points: Any = None, reset: bool = True,
                molecules: Any = None, query_molecules: Any = None) -> "RDF":
        if points is None:
            if isinstance(box, tuple) and len(box) == 2:
                box, points = box
            else:
                raise InputError("compute(box, points): give the box and the points (or one (box, points) tuple)")
        if reset:
            self._reset()
        box_text, volume = _box_param(box)
        params = {"bins": self.bins, "r_max": self.r_max, "box": box_text}
        session = _session(self._session, self._comm)
        self_pairs = query_points is None
        excluded = 0
        ids = None
        if molecules is not None or query_molecules is not None:
            if molecules is None or (query_molecules is None) != self_pairs:
                raise InputError("molecules: give molecules (and query_molecules with query_points)")
            mol_p = np.asarray(_host(molecules))
            mol_q = mol_p if self_pairs else np.asarray(_host(query_molecules))
            ids = {"molecule": [mol_p] if self_pairs else [mol_p, mol_q]}
            # The ordered pairs of one molecule, as freud counts pairs: c_p c_q a molecule (self pairs included).
            up, cp = np.unique(mol_p, return_counts=True)
            uq, cq = np.unique(mol_q, return_counts=True)
            _, ip, iq = np.intersect1d(up, uq, return_indices=True)
            excluded = int(np.sum(cp[ip].astype(np.int64) * cq[iq]))
        result = session.run(self._problem, points, query_points, params=params, ids=ids,
                             exclude_same=None if ids is None else "molecule")
        n_p = _count_points(points)
        n_q = n_p if query_points is None else _count_points(query_points)
        # freud counts a bond from each query point: each pair twice within one set.
        self._counts += result.counts * (2 if self_pairs else 1)
        finite = self.normalization_mode == "finite_size"
        pairs = n_p * ((n_q - 1) if finite else n_q)
        if excluded:
            # Within one set the points with themselves are excluded already where finite_size took them off.
            pairs -= excluded - (n_p if finite and self_pairs else 0)
        self._density += pairs / volume
        self._queries += n_q
        self._edges = result.edges
        self.frames += 1
        self._result = result
        return self

    @property
    def bin_edges(self) -> np.ndarray:
        return np.linspace(0.0, self.r_max, self.bins + 1) if self._edges is None else self._edges

    @property
    def bin_centers(self) -> np.ndarray:
        e = self.bin_edges
        return (e[:-1] + e[1:]) / 2

    @property
    def bin_counts(self) -> np.ndarray:
        return self._counts.copy()

    @property
    def rdf(self) -> np.ndarray:
        e = self.bin_edges
        shell = 4.0 / 3.0 * np.pi * (e[1:] ** 3 - e[:-1] ** 3)
        with np.errstate(divide="ignore", invalid="ignore"):
            return self._counts / (self._density * shell)

    @property
    def n_r(self) -> np.ndarray:
        """The mean number of points within each bin's outer edge of a query point."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.cumsum(self._counts) / self._queries


# ---------------------------------------------------------------- pair counts and xi

_problems: dict = {}
_BUILT_IN = frozenset(BUILT_IN)


def _problem(name: str) -> Problem:
    if name not in _problems:
        _problems[name] = Problem(name)
    return _problems[name]


def _spacing(edges: np.ndarray) -> tuple[int, float, float, bool]:
    """(bins, r_min, r_max, log) of edges twobs can hold: evenly or log-evenly spaced."""
    edges = np.asarray(edges, dtype=np.float64)
    if edges.ndim != 1 or len(edges) < 2 or not np.all(np.diff(edges) > 0) or edges[0] < 0:
        raise InputError("bins: expected increasing edges r_0 < r_1 < ... (at least two), none negative")
    bins, lo, hi = len(edges) - 1, float(edges[0]), float(edges[-1])
    if np.allclose(edges, np.linspace(lo, hi, bins + 1), rtol=1e-6, atol=0):
        return bins, lo, hi, False
    if lo > 0 and np.allclose(edges, np.geomspace(lo, hi, bins + 1), rtol=1e-6, atol=0):
        return bins, lo, hi, True
    raise InputError(
        "bins: twobs's buckets are evenly spaced or log-evenly spaced from r_min to r_max; these edges are neither"
    )


def _edges_of(binfile: Any) -> np.ndarray:
    if isinstance(binfile, str):
        rows = np.loadtxt(binfile, ndmin=2)
        return np.concatenate([rows[:, 0], rows[-1:, 1]])
    return np.asarray(binfile, dtype=np.float64)


def _pair_histogram(session: Session, a: np.ndarray, b: Optional[np.ndarray], edges: np.ndarray,
                    boxsize: Any, weights: Optional[list], angular: bool = False) -> Result:
    bins, lo, hi, log = _spacing(edges)
    params: dict = {"bins": bins, "r_min": lo, "r_max": hi}
    if angular:
        params = {"bins": bins, "theta_min": lo, "theta_max": hi}
        problem = _problem("ddtheta")
    elif boxsize is not None:
        params["box"] = _box_param(boxsize)[0]
        problem = _problem("dd_periodic")
    else:
        problem = _problem("sdh")
    return session.run(problem, a, b, params=params, weights=weights, log_bins=log)


def DD(autocorr: int, nthreads: int, binfile: Any, X1: Any, Y1: Any, Z1: Any, weights1: Any = None,
       periodic: bool = True, X2: Any = None, Y2: Any = None, Z2: Any = None, weights2: Any = None,
       verbose: bool = False, boxsize: Any = None, output_ravg: bool = False, weight_type: Optional[str] = None,
       session: Optional[Session] = None, comm: Any = None, **ignored: Any) -> np.ndarray:
    """Pair counts in Corrfunc's shape (``Corrfunc.theory.DD``): a structured
    array with ``rmin``, ``rmax``, ``ravg`` (0: not computed), ``npairs`` and
    ``weightavg``. As Corrfunc counts them: with ``autocorr=1`` each pair in
    both orders, and each point with itself in a bucket that starts at 0.
    ``nthreads`` sets the CPU threads where the run is on the CPU."""
    if output_ravg:
        raise InputError("output_ravg=True: twobs does not average the separations in a bucket")
    if periodic and boxsize is None:
        raise InputError("periodic=True needs boxsize (L, or (Lx, Ly, Lz))")
    if session is None and nthreads and default_session().backend == "cpu":
        session = _session(None, comm, backend="cpu", threads=int(nthreads))
    else:
        session = _session(session, comm)
    a = np.column_stack([_host(X1), _host(Y1), _host(Z1)])
    b = None if autocorr else np.column_stack([_host(X2), _host(Y2), _host(Z2)])
    edges = _edges_of(binfile)
    box = boxsize if periodic else None
    counts = _pair_histogram(session, a, b, edges, box, None).counts.astype(np.uint64)
    weighted = weights1 is not None
    if weighted and weight_type not in (None, "pair_product"):
        raise InputError(f"weight_type={weight_type!r}: twobs weighs a pair by the product of its points' weights")
    if weighted:
        ws = [weights1] if autocorr else [weights1, weights2 if weights2 is not None else np.ones(len(b))]
        sums = _pair_histogram(session, a, b, edges, box, ws).sums
    n = len(a)
    if autocorr:
        counts = counts * 2
        if weighted:
            sums = sums * 2
        if edges[0] == 0:
            # Corrfunc counts each point with itself at separation 0.
            counts[0] += n
            if weighted:
                sums[0] += float(np.sum(np.asarray(_host(weights1), dtype=np.float64) ** 2))
    out = np.zeros(len(edges) - 1, dtype=[("rmin", "f8"), ("rmax", "f8"), ("ravg", "f8"),
                                          ("npairs", "u8"), ("weightavg", "f8")])
    out["rmin"], out["rmax"], out["npairs"] = edges[:-1], edges[1:], counts
    if weighted:
        with np.errstate(divide="ignore", invalid="ignore"):
            out["weightavg"] = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    return out


def _cell_counts(session: Session, problem: str, a: np.ndarray, b: Optional[np.ndarray], first: np.ndarray,
                 second: dict, boxsize: Any, weights: Optional[list]) -> Result:
    """A 2-D histogram of ``ddrppi`` (rp, pi) or ``ddsmu`` (s, mu): the first
    axis's edges as ``_spacing`` takes them, the second's parameters as given."""
    bins, lo, hi, log = _spacing(first)
    axis = "rp" if problem == "ddrppi" else "s"
    params: dict = {f"{axis}_bins": bins, f"{axis}_min": lo, f"{axis}_max": hi, **second}
    if boxsize is not None:
        params["box"] = _box_param(boxsize)[0]
    return session.run(_problem(problem), a, b, params=params, weights=weights, log_bins=log)


def _corrfunc_cells(problem: str, autocorr: int, nthreads: int, first: np.ndarray, second: dict, X1: Any, Y1: Any,
                    Z1: Any, weights1: Any, periodic: bool, X2: Any, Y2: Any, Z2: Any, weights2: Any, boxsize: Any,
                    weight_type: Optional[str], session: Optional[Session], comm: Any) -> tuple:
    """(counts, weight averages or None, second axis's edges) of Corrfunc's
    2-D pair counts: both orders with autocorr, and each point with itself in
    the first cell where the first axis starts at 0, as Corrfunc counts them."""
    if periodic and boxsize is None:
        raise InputError("periodic=True needs boxsize (L, or (Lx, Ly, Lz))")
    if session is None and nthreads and default_session().backend == "cpu":
        session = _session(None, comm, backend="cpu", threads=int(nthreads))
    else:
        session = _session(session, comm)
    a = np.column_stack([_host(X1), _host(Y1), _host(Z1)])
    b = None if autocorr else np.column_stack([_host(X2), _host(Y2), _host(Z2)])
    box = boxsize if periodic else None
    run = _cell_counts(session, problem, a, b, first, second, box, None)
    counts = run.counts.astype(np.uint64).ravel()
    weighted = weights1 is not None
    if weighted and weight_type not in (None, "pair_product"):
        raise InputError(f"weight_type={weight_type!r}: twobs weighs a pair by the product of its points' weights")
    sums = None
    if weighted:
        ws = [weights1] if autocorr else [weights1, weights2 if weights2 is not None else np.ones(len(b))]
        sums = _cell_counts(session, problem, a, b, first, second, box, ws).sums.ravel()
    if autocorr:
        counts = counts * 2
        sums = None if sums is None else sums * 2
        if first[0] == 0:
            counts[0] += len(a)
            if weighted:
                sums[0] += float(np.sum(np.asarray(_host(weights1), dtype=np.float64) ** 2))
    averages = None
    if weighted:
        with np.errstate(divide="ignore", invalid="ignore"):
            averages = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    return counts, averages, np.asarray(run.edges[1], dtype=np.float64)


def DDrppi(autocorr: int, nthreads: int, pimax: float, binfile: Any, X1: Any, Y1: Any, Z1: Any, weights1: Any = None,
           periodic: bool = True, boxsize: Any = None, X2: Any = None, Y2: Any = None, Z2: Any = None,
           weights2: Any = None, verbose: bool = False, output_rpavg: bool = False, weight_type: Optional[str] = None,
           npibins: Optional[int] = None, session: Optional[Session] = None, comm: Any = None,
           **ignored: Any) -> np.ndarray:
    """Pair counts in cells of (rp, pi), in Corrfunc's shape (``Corrfunc.theory.DDrppi``):
    rp = sqrt(dx^2 + dy^2) over ``binfile``'s edges, pi = |dz| in ``npibins``
    buckets over [0, pimax) (``int(pimax)`` of them, each 1 wide, by default,
    as Corrfunc's). A structured array, one row per cell, rp outer: ``rmin``,
    ``rmax``, ``rpavg`` (0: not computed), ``pimax`` (the cell's upper pi
    edge), ``npairs``, ``weightavg``; counted as :func:`DD` counts."""
    if output_rpavg:
        raise InputError("output_rpavg=True: twobs does not average the separations in a cell")
    if npibins is None:
        if float(pimax) != int(pimax):
            raise InputError(f"pimax={pimax}: pi buckets are 1 wide by default, which needs a whole pimax; give npibins")
        npibins = int(pimax)
    edges = _edges_of(binfile)
    counts, averages, pi = _corrfunc_cells("ddrppi", autocorr, nthreads, edges,
                                           {"pi_bins": int(npibins), "pi_max": float(pimax)}, X1, Y1, Z1, weights1,
                                           periodic, X2, Y2, Z2, weights2, boxsize, weight_type, session, comm)
    return _cells_table(("rmin", "rmax", "rpavg", "pimax"), edges, pi, counts, averages)


def _cells_table(names: tuple, edges: np.ndarray, second: np.ndarray, counts: Any, averages: Any) -> np.ndarray:
    """Corrfunc's structured array of 2-D cells, the first axis outer: its
    low and high edge, an average left 0 (not computed), the second axis's
    upper edge, ``npairs`` and ``weightavg``, under Corrfunc's ``names``."""
    lo, hi, average, upper = names
    m = len(second) - 1
    out = np.zeros((len(edges) - 1) * m, dtype=[(lo, "f8"), (hi, "f8"), (average, "f8"), (upper, "f8"),
                                                ("npairs", "u8"), ("weightavg", "f8")])
    out[lo], out[hi] = np.repeat(edges[:-1], m), np.repeat(edges[1:], m)
    out[upper], out["npairs"] = np.tile(second[1:], len(edges) - 1), counts
    if averages is not None:
        out["weightavg"] = averages
    return out


def DDsmu(autocorr: int, nthreads: int, binfile: Any, mu_max: float, nmu_bins: int, X1: Any, Y1: Any, Z1: Any,
          weights1: Any = None, periodic: bool = True, boxsize: Any = None, X2: Any = None, Y2: Any = None,
          Z2: Any = None, weights2: Any = None, verbose: bool = False, output_savg: bool = False,
          weight_type: Optional[str] = None, session: Optional[Session] = None, comm: Any = None,
          **ignored: Any) -> np.ndarray:
    """Pair counts in cells of (s, mu), in Corrfunc's shape (``Corrfunc.theory.DDsmu``):
    s over ``binfile``'s edges, mu = |dz| / s (0 at s = 0) in ``nmu_bins``
    buckets over [0, mu_max). A structured array, one row per cell, s outer:
    ``smin``, ``smax``, ``savg`` (0: not computed), ``mu_max`` (the cell's
    upper mu edge), ``npairs``, ``weightavg``; counted as :func:`DD` counts."""
    if output_savg:
        raise InputError("output_savg=True: twobs does not average the separations in a cell")
    edges = _edges_of(binfile)
    counts, averages, mu = _corrfunc_cells("ddsmu", autocorr, nthreads, edges,
                                           {"mu_bins": int(nmu_bins), "mu_max": float(mu_max)}, X1, Y1, Z1, weights1,
                                           periodic, X2, Y2, Z2, weights2, boxsize, weight_type, session, comm)
    return _cells_table(("smin", "smax", "savg", "mu_max"), edges, mu, counts, averages)


def wp(data: Any, randoms: Any, rp_bins: Any, pimax: float, npibins: Optional[int] = None, boxsize: Any = None,
       estimator: Optional[str] = None, norm: str = "pairs", session: Optional[Session] = None,
       comm: Any = None) -> dict:
    """The projected correlation function wp(rp) of ``data`` against
    ``randoms`` (arrays of shape (n, 3), the line of sight along z), as
    ``twobs xi --rp-pi`` computes it: DD, RR (and DR for Landy-Szalay, the
    default) counted exactly in cells of (rp, pi), pi = |dz| in ``npibins``
    buckets over [0, pimax) (1 wide by default), xi per cell as :func:`xi`
    estimates it, and wp = 2 sum over pi of xi dpi (Corrfunc's
    ``convert_rp_pi_counts_to_wp``). With ``randoms=None`` and ``boxsize``: DD
    with minimum images, RR analytic from each cell's volume (Corrfunc's
    ``theory.wp``). Returns a dict of ``rp_edges``, ``pi_edges``, ``wp``, and
    the cells' ``xi``, ``dd``, ``rr``, ``dr`` of shape (rp buckets, pi buckets)."""
    periodic = boxsize is not None
    if periodic == (randoms is not None):
        raise InputError("wp: give randoms, or boxsize (a periodic box, RR analytic) instead of randoms; not both")
    if estimator is None:
        estimator = "natural" if periodic else "landy-szalay"
    estimator = estimator.lower().replace("_", "-")
    if estimator not in ("landy-szalay", "natural") or (periodic and estimator == "landy-szalay"):
        raise InputError(f"estimator={estimator!r}: expected 'landy-szalay' or 'natural' ('natural' alone with boxsize)")
    if norm not in ("pairs", "squared"):
        raise InputError(f"norm={norm!r}: expected 'pairs' (N(N-1)/2) or 'squared' (N^2/2)")
    if npibins is None:
        if float(pimax) != int(pimax):
            raise InputError(f"pimax={pimax}: pi buckets are 1 wide by default, which needs a whole pimax; give npibins")
        npibins = int(pimax)
    session = _session(session, comm)
    rp = np.asarray(rp_bins, dtype=np.float64)
    second = {"pi_bins": int(npibins), "pi_max": float(pimax)}
    d = _host(data)

    def within(n: int) -> float:
        return n * (n - 1) / 2 if norm == "pairs" else n * n / 2

    dd_run = _cell_counts(session, "ddrppi", d, None, rp, second, boxsize, None)
    rp_e, pi_e = (np.asarray(e, dtype=np.float64) for e in dd_run.edges)
    dd = dd_run.counts.astype(np.float64)
    dd_n = dd / within(len(d))
    dr = None
    with np.errstate(divide="ignore", invalid="ignore"):
        if periodic:
            text, _ = _box_param(boxsize)
            lengths = np.array([float(v) for v in text.split(",")], dtype=np.float32).astype(np.float64)
            if len(lengths) != 3:
                raise InputError(f"boxsize {boxsize!r}: analytic RR takes an orthorhombic box, L or (Lx, Ly, Lz)")
            if max(rp_e[-1], pi_e[-1]) > lengths.min() / 2:
                raise InputError(f"rp_max or pimax ({max(rp_e[-1], pi_e[-1])}) is above half the smallest width of "
                                 f"the box ({lengths.min() / 2}): cells that large meet their own periodic images")
            share = np.outer(np.pi * np.diff(rp_e ** 2), 2 * np.diff(pi_e)) / float(np.prod(lengths))
            rr = within(len(d)) * share
            value = dd_n / share - 1
        else:
            r = _host(randoms)
            rr = _cell_counts(session, "ddrppi", r, None, rp, second, None, None).counts.astype(np.float64)
            rr_n = rr / within(len(r))
            if estimator == "landy-szalay":
                dr = _cell_counts(session, "ddrppi", d, r, rp, second, None, None).counts.astype(np.float64)
                value = (dd_n - 2 * dr / (float(len(d)) * len(r)) + rr_n) / rr_n
            else:
                value = dd_n / rr_n - 1
    value = np.where(rr == 0, np.nan, value)
    return {"rp_edges": rp_e, "pi_edges": pi_e, "wp": 2 * (value * np.diff(pi_e)).sum(axis=1), "xi": value,
            "dd": dd, "rr": rr, "dr": dr}


def _unit_vectors(sky: Any, what: str) -> np.ndarray:
    """RA and Dec in degrees, shape (n, 2), as unit vectors in f64 (``twobs xi --radec``'s)."""
    p = np.asarray(_host(sky), dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 2:
        raise InputError(f"{what}: radec=True takes RA and Dec in degrees, shape (n, 2); found shape {p.shape}")
    bad = ~(np.isfinite(p).all(axis=1) & (np.abs(p[:, 1]) <= 90))
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"{what}: row {i + 1}: RA {p[i, 0]}, Dec {p[i, 1]} is not a point on the sky "
                         "(degrees, Dec from -90 to 90)")
    ra, dec = np.radians(p[:, 0]), np.radians(p[:, 1])
    return np.column_stack([np.cos(dec) * np.cos(ra), np.cos(dec) * np.sin(ra), np.sin(dec)])


def xi(data: Any, randoms: Any, bins: Any, estimator: Optional[str] = None, data_weights: Any = None,
       random_weights: Any = None, norm: str = "pairs", boxsize: Any = None, radec: bool = False,
       session: Optional[Session] = None, comm: Any = None) -> dict:
    """The two-point correlation function of ``data`` against ``randoms`` (arrays
    of shape (n, 3)), as ``twobs xi`` computes it: DD, RR (and DR for
    Landy-Szalay, the default) counted exactly, each divided by the pairs it
    could have had. ``norm="pairs"``: (W^2 - sum w^2) / 2 within a catalogue,
    N(N-1)/2 unweighted (Corrfunc's ``theory.xi``); ``norm="squared"``: W^2 / 2
    (Corrfunc's ``convert_3d_counts_to_cf``, TreeCorr); W_D W_R between them.
    With ``randoms=None`` and ``boxsize`` (L or (Lx, Ly, Lz)), as Corrfunc's
    ``theory.xi``: DD with minimum images in the periodic box, RR analytic (the
    data's pair total times each shell's share of the box), the natural
    estimator. With ``radec=True`` the catalogues are RA and Dec in degrees,
    shape (n, 2), and xi is w(theta) over angular buckets in degrees (``twobs
    xi --radec``, Corrfunc's ``DDtheta_mocks``). ``bins`` are the edges
    (evenly or log-evenly spaced). Returns
    a dict of ``edges``, ``xi``, ``dd``, ``rr`` and ``dr`` (None unless counted)."""
    periodic = boxsize is not None
    if periodic == (randoms is not None):
        raise InputError("xi: give randoms, or boxsize (a periodic box, RR analytic) instead of randoms; not both")
    if estimator is None:
        estimator = "natural" if periodic else "landy-szalay"
    estimator = estimator.lower().replace("_", "-")
    if estimator not in ("landy-szalay", "natural"):
        raise InputError(f"estimator={estimator!r}: expected 'landy-szalay' or 'natural'")
    if periodic and estimator == "landy-szalay":
        raise InputError("estimator='landy-szalay' with boxsize: without randoms DR and RR are both analytic and "
                         "Landy-Szalay is the natural estimator; leave estimator out")
    if norm not in ("pairs", "squared"):
        raise InputError(f"norm={norm!r}: expected 'pairs' (N(N-1)/2) or 'squared' (N^2/2)")
    if periodic and random_weights is not None:
        raise InputError("random_weights with boxsize: the randoms are analytic")
    if radec and periodic:
        raise InputError("radec=True with boxsize: angles on the sky have no periodic box")
    session = _session(session, comm)
    edges = np.asarray(bins, dtype=np.float64)
    d = _unit_vectors(data, "data") if radec else _host(data)
    weighted = data_weights is not None or random_weights is not None
    if weighted and not periodic and (data_weights is None or random_weights is None):
        raise InputError("weights for one catalogue only: give both (ones for unweighted randoms)")
    wd = None if data_weights is None else np.asarray(_host(data_weights), dtype=np.float64)

    def totals(res: Result) -> np.ndarray:
        return res.sums if weighted else res.counts.astype(np.float64)

    def within(w: Optional[np.ndarray], n: int) -> float:
        total, squares = (float(n), float(n)) if w is None else (float(w.sum()), float((w * w).sum()))
        return (total * total - squares) / 2 if norm == "pairs" else total * total / 2

    if periodic:
        text, _ = _box_param(boxsize)
        lengths = np.array([float(v) for v in text.split(",")], dtype=np.float32).astype(np.float64)
        if len(lengths) != 3:
            raise InputError(f"boxsize {boxsize!r}: xi's analytic RR takes an orthorhombic box, L or (Lx, Ly, Lz)")
        if edges[-1] > lengths.min() / 2:
            raise InputError(f"the last bucket edge {edges[-1]} is above half the smallest width of the box "
                             f"({lengths.min() / 2}): a shell that large meets its own periodic images")
    dd_run = _pair_histogram(session, d, None, edges, boxsize, None if wd is None else [wd], radec)
    dd = totals(dd_run)
    dd_n = dd / within(wd, len(d))
    dr = None
    with np.errstate(divide="ignore", invalid="ignore"):
        if periodic:
            # Shell volumes from the edges the histogram used, as the command line does.
            e = np.asarray(dd_run.edges, dtype=np.float64)
            share = 4 / 3 * np.pi * (e[1:] ** 3 - e[:-1] ** 3) / float(np.prod(lengths))
            rr = within(wd, len(d)) * share
            value = dd_n / share - 1
        else:
            r = _unit_vectors(randoms, "randoms") if radec else _host(randoms)
            wr = None if random_weights is None else np.asarray(_host(random_weights), dtype=np.float64)
            rr = totals(_pair_histogram(session, r, None, edges, None, None if wr is None else [wr], radec))
            rr_n = rr / within(wr, len(r))
            if estimator == "landy-szalay":
                dr = totals(_pair_histogram(session, d, r, edges, None, None if wd is None else [wd, wr], radec))
                cross = (float(len(d)) if wd is None else wd.sum()) * (float(len(r)) if wr is None else wr.sum())
                value = (dd_n - 2 * dr / cross + rr_n) / rr_n
            else:
                value = dd_n / rr_n - 1
    value = np.where(rr == 0, np.nan, value)
    return {"edges": edges, "xi": value, "dd": dd, "rr": rr, "dr": dr}


# ---------------------------------------------------------------- neighbours


def query_pairs(points: Any, eps: float, session: Optional[Session] = None, comm: Any = None) -> Optional[np.ndarray]:
    """Every pair (i, j), i < j, of points at most ``eps`` apart (Euclidean), as
    an (n, 2) integer array (int32 below 2^31 points): scipy's ``cKDTree.query_pairs(eps, output_type="ndarray")``,
    in the order found (sort it to compare). Under ``comm``: on rank 0, None elsewhere."""
    session = _session(session, comm)
    lib = _device_of(points)
    result = session.run(_problem("selfjoin"), points, params={"eps": float(eps)})
    return None if result.pairs is None else _back_to(lib, points, result.pairs)


def knn(points: Any, k: int, query: Any = None, session: Optional[Session] = None, comm: Any = None) -> tuple[Any, Any]:
    """The ``k`` nearest neighbours by Euclidean distance, as scipy returns them:
    ``(dist, idx)`` of shape (queries, k), nearest first, ties to the smaller
    index. Without ``query``, of every point among the others (a point is
    never its own neighbour); with it, of every query point among ``points``.
    A query with fewer than k partners has ``inf`` and ``len(points)`` where they lack.
    Under ``comm``: on rank 0, ``(None, None)`` elsewhere."""
    session = _session(session, comm)
    lib = _device_of(points)
    if query is None:
        result = session.run(_problem("knn"), points, params={"k": int(k)})
    else:
        result = session.run(_problem("knn"), query, points, params={"k": int(k)})
    ids, dist = result.ids, result.values
    if ids is None:
        return None, None
    n = _count_points(points)
    if isinstance(ids, _twobs.GpuArray):
        # Lists left on the GPU: short ones found and filled there, by the caller's library
        # (arrays of Numba or of no library come back as they lie: -1 and inf where a list is short).
        dist, ids = _back_to(lib, points, dist), _back_to(lib, points, ids)
        if lib not in ("cupy", "torch", "jax"):
            return dist, ids
        # Lists run best first, so a short one ends in -1: its last column tells (one id a list read, not k).
        if ids.shape[0] > 0 and ids.shape[1] > 0 and bool((ids[:, -1] < 0).any()):
            missing = ids < 0
            ids = _where(missing, n, ids)
            dist = _where(missing, float("inf"), dist)
        return dist, ids
    if result.missing:
        missing = ids < 0
        ids = np.where(missing, n, ids)
        dist = np.where(missing, np.inf, dist)
    return _back_to(lib, points, dist), _back_to(lib, points, ids)


def _count_points(points: Any) -> int:
    """How many points a set has, wherever it lies."""
    shape = getattr(points, "shape", None)
    if shape is not None:
        return int(shape[0])
    gpu = _on_gpu(points)
    if gpu is not None:
        return int(gpu[1]["shape"][0])
    return len(points)


def _where(mask: Any, fill: Any, x: Any) -> Any:
    """``where(mask, fill, x)`` in x's own array library."""
    kind = type(x).__module__.split(".")[0]
    if kind == "torch":
        import torch

        return torch.where(mask, torch.as_tensor(fill, dtype=x.dtype, device=x.device), x)
    if kind == "cupy":
        import cupy

        return cupy.where(mask, fill, x)
    if kind in ("jax", "jaxlib"):
        import jax.numpy as jnp

        return jnp.where(mask, fill, x)
    return np.where(mask, fill, x)
