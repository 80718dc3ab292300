"""Neighbours in scipy's shapes: :func:`query_pairs` and :func:`knn`, on
host arrays or on the GPU arrays of CuPy, PyTorch, JAX and Numba (lists
left where the points lie)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _twobs
from ._session import Session, _back_to, _device_of, _on_gpu, _problem, _session


def query_pairs(points: Any, eps: float, f64: bool = False, drop_nonfinite: bool = False,
                session: Optional[Session] = None, comm: Any = None) -> Optional[np.ndarray]:
    """Every pair of points at most ``eps`` apart, as scipy's ``cKDTree.query_pairs``.

    Parameters
    ----------
    points : array of shape (n, d)
        The points (numpy, or CuPy/PyTorch/JAX arrays on a GPU).
    eps : float
        The largest Euclidean distance of a pair.
    f64 : bool
        Compare in f64 on the points as given: exactly scipy's pairs for
        float64 points. By default points and ``eps`` are rounded to float32
        once, and a pair within f32 rounding of ``eps`` may differ from scipy's.
    drop_nonfinite : bool
        Leave out rows holding NaN or infinity instead of refusing them.
    session, comm : optional
        The :class:`Session`, or an mpi4py communicator.

    Returns
    -------
    array of shape (pairs, 2)
        Each pair (i, j), i < j, once, in the order found (sort it to
        compare); int32 below 2^31 points. Under ``comm``: on rank 0, None elsewhere.

    Examples
    --------
    >>> import numpy as np, twobs
    >>> pairs = twobs.query_pairs(np.random.default_rng(1).random((500, 3)), 0.1)
    >>> bool((pairs[:, 0] < pairs[:, 1]).all())
    True
    """
    session = _session(session, comm)
    lib = _device_of(points)
    result = session.run(_problem("selfjoin"), points, params={"eps": float(eps)}, f64=f64,
                         drop_nonfinite=drop_nonfinite)
    return None if result.pairs is None else _back_to(lib, points, result.pairs)


def knn(points: Any, k: int, query: Any = None, f64: bool = False, drop_nonfinite: bool = False,
        session: Optional[Session] = None, comm: Any = None) -> tuple[Any, Any]:
    """The ``k`` nearest neighbours by Euclidean distance, as scipy's ``cKDTree.query`` returns them.

    Parameters
    ----------
    points : array of shape (n, d)
        The points searched (numpy, or CuPy/PyTorch/JAX/Numba arrays on a
        GPU, whose lists stay there).
    k : int
        Neighbours per query.
    query : array of shape (m, d), optional
        The query points; without it, every point among the others (a point
        is never its own neighbour).
    f64 : bool
        Distances in f64 on the points as given (float64 distances,
        scipy's lists for float64 points); by default points are rounded
        to float32 once and distances are float32.
    drop_nonfinite : bool
        Leave out rows holding NaN or infinity instead of refusing them.
    session, comm : optional
        The :class:`Session`, or an mpi4py communicator.

    Returns
    -------
    (dist, idx) : arrays of shape (queries, k)
        Nearest first, ties to the smaller index; a query with fewer than
        k partners has ``inf`` and ``len(points)`` where they lack. Under
        ``comm``: on rank 0, ``(None, None)`` elsewhere.

    Examples
    --------
    >>> import numpy as np, twobs
    >>> dist, idx = twobs.knn(np.random.default_rng(1).random((500, 3)), 4)
    >>> dist.shape, idx.shape
    ((500, 4), (500, 4))
    """
    session = _session(session, comm)
    lib = _device_of(points)
    given = dict(params={"k": int(k)}, f64=f64, drop_nonfinite=drop_nonfinite)
    if query is None:
        result = session.run(_problem("knn"), points, **given)
    else:
        result = session.run(_problem("knn"), query, points, **given)
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
