"""g(r) in freud's shape: :class:`RDF`."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _twobs
from ._session import Problem, Result, Session, _box_param, _session
from ._twobs import InputError


class RDF:
    """The radial distribution function g(r), in freud's shape.

    Parameters
    ----------
    bins : int
        The number of shells, each ``r_max / bins`` wide.
    r_max : float
        The outer edge of the last shell.
    r_min : float, optional
        Must be 0: twobs's g(r) starts at 0.
    normalization_mode : {"exact", "finite_size"}
        freud's: "exact" divides by N_p N_q / V, "finite_size" by
        N_p (N_q - 1) / V (the command line's and MDAnalysis's).
    f64 : bool
        Distances in f64 on the points as given, on the CPU backend; by
        default points are rounded to float32 once.
    session, comm : optional
        Where the runs go (:class:`Session`), or an mpi4py communicator.

    Notes
    -----
    ``compute(box, points, query_points=None, reset=True)`` (or
    ``compute((box, points))``) takes a box per call; ``reset=False`` adds
    the frame to the ones before (NPT trajectories: each frame's own box).
    A freud ``Box`` (anything with ``Lx ... yz``) is centred on the origin,
    as freud keeps it; a plain ``L`` or ``(Lx, Ly, Lz)`` has its corner at
    the origin. Results: ``bin_edges``, ``bin_centers``, ``bin_counts`` (as
    freud counts them: each pair from each end where the points query
    themselves), ``rdf``, ``n_r``. The counts are exact: the same as ``twobs
    run rdf`` on the same points; g(r) and its normalisation are the
    library's (``twobs::rdf``).

    ``compute(..., molecules=ids, query_molecules=ids_q)`` leaves out every
    pair of points in the same molecule (MDAnalysis's ``exclusion_block``,
    for molecules of any size), and takes those pairs out of the density
    too. A partial g(r) between two types is
    ``compute(box, points[types == "O"], points[types == "H"], ...)``.

    Examples
    --------
    >>> import numpy as np, twobs
    >>> points = np.random.default_rng(1).random((2000, 3), dtype=np.float32) * 10
    >>> rdf = twobs.RDF(bins=50, r_max=2.5).compute(10.0, points)
    >>> rdf.bin_counts.shape, rdf.rdf.shape
    ((50,), (50,))
    """

    def __init__(self, bins: int, r_max: float, r_min: float = 0.0, normalization_mode: str = "exact",
                 f64: bool = False, session: Optional[Session] = None, comm: Any = None):
        if bins < 1:
            raise InputError(f"bins={bins}: at least 1")
        if not (r_max > 0):
            raise InputError(f"r_max={r_max}: must be positive")
        if r_min != 0:
            raise InputError(f"r_min={r_min}: twobs's g(r) starts at 0 (shells of width r_max / bins)")
        self.bins = int(bins)
        self.r_max = float(r_max)
        self.r_min = 0.0
        self.normalization_mode = normalization_mode
        self.f64 = bool(f64)
        self._session = session
        self._comm = comm
        self._problem = Problem("rdf")
        self._native = _twobs.Rdf("freud", normalization_mode, self.bins, self.r_min, self.r_max)
        self._result: Optional[Result] = None

    @property
    def frames(self) -> int:
        """How many frames the counts add up."""
        return self._native.frames

    @property
    def report(self) -> Optional[dict]:
        """The last frame's report (None before the first compute)."""
        return None if self._result is None else self._result.report

    def compute(self, box: Any, points: Any = None, query_points: Any = None, reset: bool = True,
                molecules: Any = None, query_molecules: Any = None, outside_box: Optional[str] = None,
                drop_nonfinite: bool = False) -> "RDF":
        """Counts one frame's pairs into the shells.

        Parameters
        ----------
        box : float, sequence or freud.box.Box
            ``L``, ``(Lx, Ly, Lz)`` or ``(Lx, Ly, Lz, xy, xz, yz)`` with the
            corner at the origin, or a freud ``Box`` (centred on it). A
            ``(box, points)`` tuple stands for both.
        points : array of shape (N, 3)
            The points (float32, or float64 rounded to float32).
        query_points : array of shape (M, 3), optional
            The points whose neighbours are counted among ``points`` (A-B
            g(r)); None counts ``points`` among themselves.
        reset : bool
            Forget the frames before this one.
        molecules, query_molecules : int arrays, optional
            A molecule per point: pairs within a molecule are left out.
        outside_box : {"wrap", "refuse"}, optional
            Points outside the box: wrapped into it, or refused (default:
            wrapped where at most half the points lie outside).
        drop_nonfinite : bool
            Leave out rows holding NaN or infinity instead of refusing them.

        Returns
        -------
        RDF
            This object, with the frame added.
        """
        if points is None:
            if isinstance(box, tuple) and len(box) == 2:
                box, points = box
            else:
                raise InputError("compute(box, points): give the box and the points (or one (box, points) tuple)")
        if reset:
            self._native.reset()
        box_text, origin = _box_param(box)
        params = {"bins": self.bins, "r_max": self.r_max, "box": box_text}
        session = _session(self._session, self._comm)
        ids = None
        if molecules is not None or query_molecules is not None:
            if molecules is None or (query_molecules is None) != (query_points is None):
                raise InputError("molecules: give molecules (and query_molecules with query_points)")
            ids = {"molecule": [molecules] if query_points is None else [molecules, query_molecules]}
        result = session.run(self._problem, points, query_points, params=params, ids=ids, box_origin=origin,
                             exclude_same=None if ids is None else "molecule", outside_box=outside_box,
                             drop_nonfinite=drop_nonfinite, f64=self.f64)
        self._native.add(result._raw)
        self._result = result
        return self

    @property
    def bin_edges(self) -> np.ndarray:
        """The shells' edges (the thresholds the engine counted with)."""
        return self._native.edges

    @property
    def bin_centers(self) -> np.ndarray:
        """The shells' centres."""
        return self._native.centers

    @property
    def bin_counts(self) -> np.ndarray:
        """Pairs per shell over every frame, each pair from each end within one set."""
        return self._native.counts

    @property
    def rdf(self) -> np.ndarray:
        """g(r) of each shell."""
        return self._native.rdf

    @property
    def n_r(self) -> np.ndarray:
        """The mean number of points within each shell's outer edge of a query point."""
        return self._native.n_r
