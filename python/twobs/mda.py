"""MDAnalysis's analysis class, on twobs's engine: :class:`InterRDF`.

The same constructor, ``run(start, stop, step, frames=...)`` and ``results``
(``bins``, ``edges``, ``count``, ``rdf``) as ``MDAnalysis.analysis.rdf.InterRDF``,
one session for every frame. MDAnalysis is an optional dependency: the
atom groups are MDAnalysis's own, and this module imports nothing of it.
The pairs are counted exactly by the engine (every pair of an atom of
``g1`` and one of ``g2``, as MDAnalysis counts them, an atom with itself
included at r = 0 unless an exclusion block leaves it out); g(r) and its
normalisation are the library's (``twobs::rdf``, MDAnalysis's convention).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from . import _twobs
from ._session import Session, _problem, _session
from ._twobs import InputError


# MDAnalysis's arithmetic for a pair without a box (`calc_distance_array`):
# each coordinate's difference in float32, as its C code subtracts two
# floats, then squares, sum and root in double. A spec of twobs's own, so
# that its counts equal MDAnalysis's pair for pair.
_OPEN_SPEC = """<problem name="mdanalysis_distance">
  <summary>MDAnalysis's distance between an atom of A and one of B, counted into buckets over [r_min, r_max)</summary>
  <input sets="2" type="f32" dims="3"/>
  <function file="mdanalysis_distance.cu" name="distance" symmetric="true" returns="f64"/>
  <output kind="histogram" bins="bins" min="r_min" max="r_max"/>
  <cutoff value="r_max" metric="euclidean"/>
  <param name="bins" type="u32" default="75">number of buckets</param>
  <param name="r_min" type="f64" default="0">lower edge of the first bucket</param>
  <param name="r_max" type="f64" default="15">upper edge of the last bucket</param>
</problem>"""

_OPEN_SNIPPET = """__device__ double distance(float3 a, float3 b) {
  double dx = (double)(a.x - b.x), dy = (double)(a.y - b.y), dz = (double)(a.z - b.z);
  return sqrt(dx * dx + dy * dy + dz * dz);
}
"""

_open_problem = None


def _open() -> Any:
    global _open_problem
    if _open_problem is None:
        from ._session import Problem
        _open_problem = Problem(_OPEN_SPEC, snippet=_OPEN_SNIPPET)
    return _open_problem


class Results(dict):
    """Results as MDAnalysis gives them: a dict whose keys are attributes too."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class InterRDF:
    """The g(r) between two atom groups over a trajectory, as MDAnalysis's ``InterRDF``.

    Parameters
    ----------
    g1, g2 : MDAnalysis AtomGroup
        The two groups (the same group for a one-species g(r)).
    nbins : int
        Buckets over ``range``.
    range : (float, float)
        The first bucket's lower edge and the last one's upper edge.
    norm : {"rdf", "density", "none"}
        MDAnalysis's: g(r) (counts over the frames' pair density and the
        shells' volumes, with the mean volume), the density, or counts per frame.
    exclusion_block : (int, int), optional
        Leave out the pairs within blocks of ``(n1, n2)`` consecutive atoms of
        ``g1`` and ``g2`` (a molecule's atoms), as MDAnalysis does.
    f64 : bool
        In a periodic box, distances in f64 on the CPU backend; by default
        float32 (MDAnalysis's positions are float32). Without a box the
        distances are MDAnalysis's own arithmetic (float32 differences,
        double squares and root), so counts equal MDAnalysis's pair for pair.
    session : Session, optional
        Where the frames run (:func:`default_session` by default).

    Examples
    --------
    >>> import MDAnalysis as mda                                    # doctest: +SKIP
    >>> from MDAnalysisTests.datafiles import PSF, DCD              # doctest: +SKIP
    >>> u = mda.Universe(PSF, DCD)                                  # doctest: +SKIP
    >>> ca = u.select_atoms("name CA")                              # doctest: +SKIP
    >>> rdf = twobs.mda.InterRDF(ca, ca, nbins=75, range=(0, 15)).run()  # doctest: +SKIP
    >>> rdf.results.bins, rdf.results.rdf                           # doctest: +SKIP
    """

    def __init__(self, g1: Any, g2: Any, nbins: int = 75, range: Sequence[float] = (0.0, 15.0),
                 norm: str = "rdf", exclusion_block: Optional[Sequence[int]] = None, f64: bool = False,
                 session: Optional[Session] = None, verbose: bool = False, **kwargs: Any):
        self._g1, self._g2 = g1, g2
        self.u = g1.universe
        self._trajectory = self.u.trajectory
        norm = str(norm).lower()
        lo, hi = float(range[0]), float(range[1])
        if not (0 <= lo < hi):
            raise InputError(f"range={tuple(range)}: expected 0 <= start < stop")
        if int(nbins) < 1:
            raise InputError(f"nbins={nbins}: at least 1")
        self.nbins, self.range, self.norm = int(nbins), (lo, hi), norm
        self._exclusion_block = None if exclusion_block is None else tuple(int(x) for x in exclusion_block)
        self.f64 = bool(f64)
        self._session = session
        self._native = _twobs.Rdf("mdanalysis", norm, self.nbins, lo, hi)
        self.results = Results()
        self.n_frames = 0

    def _ids(self) -> Optional[dict]:
        """Each atom's block, where an exclusion block leaves out the pairs within one."""
        if self._exclusion_block is None:
            return None
        x1, x2 = self._exclusion_block
        return {"block": [np.arange(len(self._g1), dtype=np.int32) // x1,
                          np.arange(len(self._g2), dtype=np.int32) // x2]}

    def _frames(self, start: Optional[int], stop: Optional[int], step: Optional[int], frames: Any) -> Any:
        if frames is not None:
            if any(x is not None for x in (start, stop, step)):
                raise InputError("start/stop/step cannot be combined with frames")
            return self._trajectory[frames]
        return self._trajectory[slice(start, stop, step)]

    def run(self, start: Optional[int] = None, stop: Optional[int] = None, step: Optional[int] = None,
            frames: Any = None, verbose: Optional[bool] = None, **kwargs: Any) -> "InterRDF":
        """Counts every frame of the trajectory's slice (or ``frames``) and concludes, as MDAnalysis's ``run``.

        Returns
        -------
        InterRDF
            This object, with ``results.bins``, ``results.edges``,
            ``results.count`` and ``results.rdf``.
        """
        session = _session(self._session)
        self._native.reset()
        ids = self._ids()
        lo, hi = self.range
        params = {"bins": self.nbins, "r_min": lo, "r_max": hi}
        self.n_frames = 0
        for ts in self._frames(start, stop, step, frames):
            dimensions = ts.dimensions
            if dimensions is None:
                problem, frame_params = _open(), dict(params)
            else:
                box = _twobs.box_of_dimensions([float(x) for x in dimensions])
                problem, frame_params = _problem("dd_periodic"), {**params, "box": box}
            result = session.run(problem, self._g1.positions, self._g2.positions, params=frame_params, ids=ids,
                                 exclude_same=None if ids is None else "block",
                                 outside_box=None if dimensions is None else "wrap",
                                 f64=self.f64 and dimensions is not None)
            self._native.add(result._raw)
            self.n_frames += 1
        self.results.count = self._native.counts.astype(np.float64)
        self.results.edges = self._native.edges
        self.results.bins = self._native.centers
        self.results.rdf = self._native.rdf
        return self
