"""Sessions, problems and results: where a run goes, what it runs, and
what it returned; the arrays a caller gives, taken where they lie."""

from __future__ import annotations

import json
import math
import os
from typing import Any, Optional, Sequence

import numpy as np

from . import _twobs
from ._twobs import BUILT_IN, MPI, Error, InputError

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
        """The run's seconds by stage (compile, index, compute, total) and its pairs a second."""
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


def _dtypes(problem: Problem, f64: bool) -> list:
    """The element's scalar types, float32 read as float64 where the run is in f64."""
    return ["float64" if f64 and t == "float32" else t for t in problem.dtypes]


def _points(x: Any, problem: Problem, name: str, f64: bool = False) -> np.ndarray:
    """A set of points as the engine takes it: 2-D, of the element's type
    (float64 kept as it is where the run is in f64)."""
    a = _host(x)
    if a.ndim == 1 and len(problem.dtypes) == 1:
        a = a.reshape(-1, 1)
    if a.ndim != 2:
        raise InputError(f"{name}: an array of shape {a.shape}; expected (points, coordinates)")
    dtype = np.dtype(_dtypes(problem, f64)[0])
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


def _fields(columns: dict, problem: Problem, name: str, f64: bool = False) -> list:
    """A set given as a dict of named columns, one per field of the spec's
    element (a record's, or a vector's x, y, z), in the spec's order."""
    fields = problem.fields
    missing = [f for f in fields if f not in columns]
    unknown = [f for f in columns if f not in fields]
    if missing or unknown:
        said = "; ".join(p for p in (missing and f"missing {missing}", unknown and f"unknown {unknown}") if p)
        raise InputError(f"{name}: the columns {sorted(columns)} are not the fields {fields} of problem "
                         f"`{problem.name}` ({said})")
    return [np.ascontiguousarray(_host(columns[f]), dtype=np.dtype(t)) for f, t in zip(fields, _dtypes(problem, f64))]


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
    """Where runs go and with what.

    Parameters
    ----------
    backend : {"auto", "cuda", "cpu"}
        The GPU when one is usable, else the CPU's cores.
    gpus : sequence of int, optional
        GPU ordinals (all by default).
    threads : int
        CPU threads (0: every core).
    streams : int
        CUDA streams per GPU.
    index : {"auto", "grid", "none", "cells"}
        How cut-off problems find their pairs (``"none"``: every pair).
    verify : bool
        Re-compute every run on the CPU and fail on any difference.
    progress : bool or callable
        True (the default): a line on ``sys.stderr`` (a notebook's cell
        too) for runs the schedule estimates at more than a few seconds;
        False: none; a callable: called as ``progress(done, total)`` pairs
        every 50 ms of such a run (raising in it stops the run).
    comm : mpi4py communicator, optional
        Ranks that share every run (below).

    Notes
    -----
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
        progress: Any = True,
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
        box_origin: str = "corner",
        f64: bool = False,
        ids: Optional[dict] = None,
        exclude_same: Optional[str] = None,
        drop_nonfinite: bool = False,
        pair_weight: Optional[str] = None,
    ) -> Result:
        """Runs ``problem`` on set ``a`` (and ``b``).

        Parameters
        ----------
        problem : Problem or str
            A :class:`Problem`, a built-in name or a spec path.
        a, b : array of shape (points, coordinates), list of rows, or dict
            The sets: a 2-D array or a list of rows (as ``np.asarray`` reads
            it), or a dict of named columns, one per field of the spec's
            element (a record's fields, or ``x``, ``y``, ``z``). numpy,
            CuPy, PyTorch, JAX and Numba arrays are read where they lie.
        params : dict, optional
            The spec's parameters by name (a box as L, (Lx, Ly, Lz) or
            (Lx, Ly, Lz, xy, xz, yz)).
        weights : sequence of arrays, optional
            A weight per point of each set (histograms and sums).
        log_bins : bool
            Log-spaced buckets.
        outside_box : {"wrap", "refuse"}, optional
            Points outside the periodic box: wrapped into it, or refused
            (default: wrapped where at most half a set lies outside).
        box_origin : {"corner", "center"}
            Where the periodic box lies: its corner at the origin, or
            centred on it (freud's and HOOMD-blue's convention).
        f64 : bool
            f64 arithmetic on the points as given (float64 kept, parameters
            read as f64), on the CPU backend; by default points and
            parameters are rounded to the spec's float32 once.
        ids : dict, optional
            An id's name to one integer array per set (the spec's ``<id>``).
        exclude_same : str, optional
            Leave out every pair whose points share this id (``"molecule"``).
        drop_nonfinite : bool
            Leave out rows holding NaN or infinity (indices in the results
            are still the caller's rows) instead of refusing them.
        pair_weight : str, optional
            What each pair adds to its bucket in place of 1: in a histogram a
            function of the snippet (the pair function itself sums each
            bucket's separations: the sums behind Corrfunc's ``ravg``), in a
            2-D histogram the name of an axis (``"s"``: ``savg``).

        Returns
        -------
        Result
            Arrays by what the problem makes, and the run's report.

        Examples
        --------
        >>> import numpy as np, twobs
        >>> points = np.random.default_rng(1).random((1000, 3), dtype=np.float32)
        >>> twobs.Session(backend="cpu").run("sdh", points, params={"bins": 10}).counts.sum()
        np.uint64(499500)
        """
        if not isinstance(problem, Problem):
            # A built-in's spec is read once (a file of the same name is read each call, as it may change).
            problem = _problem(problem) if problem in _BUILT_IN and not os.path.exists(problem) else Problem(problem)
        sets = [a] if b is None else [a, b]
        gpu = [_on_gpu(s) for s in sets]
        # Under MPI ranks every rank reads host points (their digests are compared), and verify re-computes
        # from them: GPU arrays are copied there.
        plain = (weights is None and not ids and exclude_same is None and outside_box is None and not f64
                 and not drop_nonfinite and pair_weight is None
                 and box_origin == "corner"
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
            if isinstance(s, dict):
                taken.append(_fields(s, problem, name, f64))
            else:
                # A list or tuple is rows, as np.asarray reads it (numpy's and scipy's convention).
                taken.append(_points(s, problem, name, f64))
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
            box_origin=box_origin,
            f64=f64,
            ids=id_arrays,
            exclude_same=exclude_same,
            drop_nonfinite=drop_nonfinite,
            pair_weight=pair_weight,
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


_problems: dict = {}
_BUILT_IN = frozenset(BUILT_IN)


def _problem(name: str) -> Problem:
    if name not in _problems:
        _problems[name] = Problem(name)
    return _problems[name]


def _box_param(box: Any) -> tuple[str, str]:
    """A box as the spec's box parameter takes it, and where it lies: a
    freud ``Box`` (or anything with ``Lx ... yz``) is centred on the origin,
    as freud and HOOMD-blue keep it; ``L`` or ``(Lx, Ly, Lz[, xy, xz, yz])``
    has its corner at the origin."""
    origin = "corner"
    if hasattr(box, "Lx") and hasattr(box, "Lz"):  # a freud.box.Box, or anything shaped like one
        if getattr(box, "is2D", False):
            raise InputError("a 2-D box: twobs's g(r) is 3-D")
        values = [box.Lx, box.Ly, box.Lz, box.xy, box.xz, box.yz]
        origin = "center"
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
    return ",".join(repr(float(v)) for v in values), origin
