"""MDAnalysis's analysis classes, on twobs's engine: :class:`InterRDF` and :class:`InterRDF_s`.

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

import functools
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


@functools.lru_cache(maxsize=None)
def _own_problem(spec: str, snippet: str) -> Any:
    """One of this module's specs, made once a process."""
    from ._session import Problem
    return Problem(spec, snippet=snippet)


def _frames(trajectory: Any, start: Optional[int], stop: Optional[int], step: Optional[int], frames: Any) -> Any:
    """The frames ``run`` visits, as MDAnalysis's ``run(start, stop, step, frames=...)`` takes them."""
    if frames is not None:
        if any(x is not None for x in (start, stop, step)):
            raise InputError("start/stop/step cannot be combined with frames")
        return trajectory[frames]
    return trajectory[slice(start, stop, step)]


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
        for ts in _frames(self._trajectory, start, stop, step, frames):
            dimensions = ts.dimensions
            if dimensions is None:
                problem, frame_params = _own_problem(_OPEN_SPEC, _OPEN_SNIPPET), dict(params)
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


# Each atom pair's own row of buckets (InterRDF_s): the pair's distance, as
# MDAnalysis computes it (float32 differences, double squares and root; in a
# periodic box the minimum image in double, whole edge vectors off, the last
# edge first), and its number a * partners + b, bucketed 1 wide.
_SITES_SPEC = """<problem name="mdanalysis_sites">
  <summary>MDAnalysis's distance between each atom of A and each of B, counted per atom pair into buckets over [r_min, r_max)</summary>
  <input sets="2" type="f32" dims="3"/>
  <function file="mdanalysis_sites.cu" name="distance_and_pair" returns="f64"/>
  <output kind="histogram2d">
    <axis name="pair" bins="pairs" max="pair_end"/>
    <axis name="r" bins="bins" min="r_min" max="r_max"/>
  </output>
  <cutoff value="r_max" metric="euclidean"/>
  <param name="bins" type="u32" default="75">number of buckets</param>
  <param name="r_min" type="f64" default="0">lower edge of the first bucket</param>
  <param name="r_max" type="f64" default="15">upper edge of the last bucket</param>
  <param name="pairs" type="u32" default="1">atoms of A times atoms of B</param>
  <param name="pair_end" type="f64" default="1">pairs, as the pair axis's upper edge</param>
  <param name="partners" type="u32" default="1">atoms of B</param>
  <param name="box" type="box" default="0">periodic box, or 0 for none</param>
</problem>"""

_SITES_SNIPPET = """__device__ Value2 distance_and_pair(Point a, Point b) {
  double dx = (double)(a.x - b.x), dy = (double)(a.y - b.y), dz = (double)(a.z - b.z);
  const auto& box = params::box;
  if (box.lx > 0.0f) {
    const double lx = box.lx, ly = box.ly, lz = box.lz;
    const double nz = rint(dz / lz);
    dx -= box.xz * lz * nz;
    dy -= box.yz * lz * nz;
    dz -= lz * nz;
    const double ny = rint(dy / ly);
    dx -= box.xy * ly * ny;
    dy -= ly * ny;
    dx -= lx * rint(dx / lx);
  }
  return {(double)a.site * params::partners + b.site, sqrt(dx * dx + dy * dy + dz * dz)};
}
"""


class InterRDF_s:
    """Site-specific g(r): each atom of ``g1`` with each of ``g2``, as MDAnalysis's ``InterRDF_s``.

    Parameters
    ----------
    u : MDAnalysis Universe
        The universe of the atom groups (as MDAnalysis takes it).
    ags : list of [AtomGroup, AtomGroup]
        The pairs of groups; each pair gets counts of shape
        (len(g1), len(g2), nbins).
    nbins : int
        Buckets over ``range``.
    range : (float, float)
        The first bucket's lower edge and the last one's upper edge.
    norm : {"rdf", "density", "none"}
        MDAnalysis's: counts over the frames, the shells' volumes and the
        mean box volume's density; over the frames and shells; or over the frames.
    session : Session, optional
        Where the frames run (:func:`default_session` by default).

    Notes
    -----
    Every atom pair is counted by the engine in a 2-D histogram (the pair's
    number, its distance), distances as MDAnalysis computes them (float32
    differences, double squares; in a box, the minimum image in double), one
    session for every frame; the normalisation is MDAnalysis's. At most
    2^24 cells (atom pairs times buckets) a pair of groups. Buckets are
    [r_min, r_max) as :class:`InterRDF`'s: MDAnalysis's ``InterRDF_s``
    (2.8 on) truncates a negative bucket index toward zero, so that with a
    range above 0 its first bucket also holds the pairs up to a bucket's
    width below ``r_min``; from r = 0 the counts are the same.

    Examples
    --------
    >>> import MDAnalysis as mda                                          # doctest: +SKIP
    >>> from MDAnalysisTests.datafiles import PSF, DCD                    # doctest: +SKIP
    >>> u = mda.Universe(PSF, DCD)                                        # doctest: +SKIP
    >>> s = twobs.mda.InterRDF_s(u, [[u.atoms[:5], u.atoms[5:9]]]).run()  # doctest: +SKIP
    >>> s.results.rdf[0].shape                                            # doctest: +SKIP
    (5, 4, 75)
    """

    def __init__(self, u: Any, ags: Sequence[Sequence[Any]], nbins: int = 75, range: Sequence[float] = (0.0, 15.0),
                 norm: str = "rdf", session: Optional[Session] = None, verbose: bool = False, **kwargs: Any):
        self.u = u
        self._ags = [tuple(pair) for pair in ags]
        if not self._ags or any(len(pair) != 2 for pair in self._ags):
            raise InputError("ags: a list of [AtomGroup, AtomGroup] pairs")
        norm = str(norm).lower()
        if norm not in ("rdf", "density", "none"):
            raise InputError(f"norm={norm!r}: 'rdf', 'density' or 'none'")
        lo, hi = float(range[0]), float(range[1])
        if not (0 <= lo < hi):
            raise InputError(f"range={tuple(range)}: expected 0 <= start < stop")
        if int(nbins) < 1:
            raise InputError(f"nbins={nbins}: at least 1")
        for g1, g2 in self._ags:
            if len(g1) * len(g2) * int(nbins) > 1 << 24:
                raise InputError(f"{len(g1)} x {len(g2)} atoms x {nbins} buckets: at most 2^24 cells a pair of groups")
        self.nbins, self.range, self.norm = int(nbins), (lo, hi), norm
        self._session = session
        self.results = Results()
        self.n_frames = 0

    def run(self, start: Optional[int] = None, stop: Optional[int] = None, step: Optional[int] = None,
            frames: Any = None, verbose: Optional[bool] = None, **kwargs: Any) -> "InterRDF_s":
        """Counts every frame of the trajectory's slice (or ``frames``) and concludes, as MDAnalysis's ``run``.

        Returns
        -------
        InterRDF_s
            This object, with ``results.bins``, ``results.edges``,
            ``results.count`` and ``results.rdf`` (a list, one array of shape
            (len(g1), len(g2), nbins) per pair of groups).
        """
        sliced = _frames(self.u.trajectory, start, stop, step, frames)
        session = _session(self._session)
        lo, hi = self.range
        counts = [np.zeros((len(g1), len(g2), self.nbins)) for g1, g2 in self._ags]
        volumes = []
        for ts in sliced:
            dimensions = ts.dimensions
            box = None if dimensions is None else _twobs.box_of_dimensions([float(x) for x in dimensions])
            for (g1, g2), count in zip(self._ags, counts):
                n1, n2 = len(g1), len(g2)
                params = {"bins": self.nbins, "r_min": lo, "r_max": hi, "pairs": n1 * n2, "pair_end": float(n1 * n2),
                          "partners": n2, "box": box or "0"}
                sites = {"site": [np.arange(n1, dtype=np.int32), np.arange(n2, dtype=np.int32)]}
                result = session.run(_own_problem(_SITES_SPEC, _SITES_SNIPPET), g1.positions, g2.positions, params=params, ids=sites,
                                     outside_box=None if box is None else "wrap")
                count += np.asarray(result.counts, dtype=np.float64).reshape(n1, n2, self.nbins)
            volumes.append(0.0 if dimensions is None else float(ts.volume))
        self.n_frames = len(volumes)
        native = _twobs.Rdf("mdanalysis", self.norm, self.nbins, lo, hi)
        self.results.edges = native.edges
        self.results.bins = native.centers
        self.results.count = counts
        divisors = _twobs.site_divisors(self.norm, list(native.edges), volumes)
        self.results.rdf = [count / divisors for count in counts]
        return self

    def get_cdf(self) -> list:
        """The cumulative counts per frame of each pair of groups, as MDAnalysis's ``get_cdf``."""
        self.results.cdf = [np.cumsum(count, axis=2) / self.n_frames for count in self.results.count]
        return self.results.cdf
