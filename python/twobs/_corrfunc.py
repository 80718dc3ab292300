"""Pair counts and correlation functions in Corrfunc's shapes: :func:`DD`,
:func:`DDrppi`, :func:`DDsmu`, :func:`xi`, :func:`wp`. The counts are the
engine's exact histograms; Corrfunc's conventions, the estimators, analytic
RR and jackknife covariances are the library's (``twobs::corrfunc``,
``twobs::xi``); this module converts arrays and names the results."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _twobs
from ._session import Session, _box_param, _host, _problem, _session, default_session
from ._twobs import InputError


def _edges_of(binfile: Any) -> np.ndarray:
    """Bucket edges given as an array, or as Corrfunc's bin file (rows of low and high edge)."""
    if isinstance(binfile, str):
        rows = np.loadtxt(binfile, ndmin=2)
        return np.concatenate([rows[:, 0], rows[-1:, 1]])
    return np.asarray(binfile, dtype=np.float64)


def _corrfunc_session(session: Optional[Session], comm: Any, nthreads: int) -> Session:
    """The session of a Corrfunc-shaped call: ``nthreads`` CPU threads where the run is on the CPU."""
    if session is None and nthreads and default_session().backend == "cpu":
        return _session(None, comm, backend="cpu", threads=int(nthreads))
    return _session(session, comm)


def _catalogues(autocorr: int, X1: Any, Y1: Any, Z1: Any, X2: Any, Y2: Any, Z2: Any) -> tuple:
    a = np.column_stack([_host(X1), _host(Y1), _host(Z1)])
    b = None if autocorr else np.column_stack([_host(X2), _host(Y2), _host(Z2)])
    return a, b


# The separation each pair adds, per bucket, for Corrfunc's averages: a 1-D
# histogram's pair function, a 2-D one's first axis.
_SEPARATION = {"sdh": "distance", "dd_periodic": "min_image_distance", "ddsmu": "s", "ddrppi": "rp"}


def _counted(session: Session, problem: str, a: np.ndarray, b: Optional[np.ndarray], params: dict, log: bool,
             edges: np.ndarray, weights: tuple, autocorr: int, weight_type: Optional[str], f64: bool,
             average: bool = False) -> tuple:
    """(npairs, weightavg or None, the mean separation or None, the run's edges) of a Corrfunc-shaped count."""
    weights1, weights2 = weights
    if weights1 is not None and weight_type not in (None, "pair_product"):
        raise InputError(f"weight_type={weight_type!r}: twobs weighs a pair by the product of its points' weights")
    run = session.run(_problem(problem), a, b, params=params, log_bins=log, f64=f64)
    counts = np.ascontiguousarray(run.counts, dtype=np.uint64).ravel()
    sums = None
    w1 = None if weights1 is None else np.ascontiguousarray(_host(weights1), dtype=np.float64)
    if w1 is not None:
        # Corrfunc weighs an unweighted second catalogue by ones.
        ws = [w1] if autocorr else [w1, weights2 if weights2 is not None else np.ones(len(b))]
        sums = np.ascontiguousarray(session.run(_problem(problem), a, b, params=params, weights=ws,
                                                log_bins=log, f64=f64).sums, dtype=np.float64).ravel()
    separations = None
    if average:
        separations = np.ascontiguousarray(session.run(_problem(problem), a, b, params=params, log_bins=log, f64=f64,
                                                       pair_weight=_SEPARATION[problem]).sums,
                                           dtype=np.float64).ravel()
    npairs, weightavg, avg = _twobs.corrfunc_table(counts, list(edges), sums=sums, autocorr=bool(autocorr),
                                                   points=len(a), self_weights=w1, separations=separations)
    return npairs, weightavg, avg, run.edges


def DD(autocorr: int, nthreads: int, binfile: Any, X1: Any, Y1: Any, Z1: Any, weights1: Any = None,
       periodic: bool = True, X2: Any = None, Y2: Any = None, Z2: Any = None, weights2: Any = None,
       verbose: bool = False, boxsize: Any = None, output_ravg: bool = False, weight_type: Optional[str] = None,
       f64: bool = False, session: Optional[Session] = None, comm: Any = None, **ignored: Any) -> np.ndarray:
    """Pair counts in Corrfunc's shape (``Corrfunc.theory.DD``).

    Parameters
    ----------
    autocorr : int
        1: the pairs of ``X1, Y1, Z1`` among themselves; 0: between it and ``X2, Y2, Z2``.
    nthreads : int
        CPU threads, where the run is on the CPU.
    binfile : array or str
        The buckets' edges (evenly or log-evenly spaced), or Corrfunc's bin file.
    X1, Y1, Z1, X2, Y2, Z2 : arrays
        Coordinates.
    weights1, weights2 : arrays, optional
        A weight per point: ``weightavg`` is the mean product of a pair's weights.
    periodic, boxsize
        Minimum-image separations in the box ``boxsize`` (L or (Lx, Ly, Lz)).
    f64 : bool
        Separations in f64 on the points as given (Corrfunc's double
        precision), on the CPU backend; by default points and edges are
        rounded to float32 once, and a pair within f32 rounding of an edge
        may fall in the next bucket.

    Returns
    -------
    numpy structured array
        ``rmin``, ``rmax``, ``ravg`` (the mean separation of a bucket's
        pairs with ``output_ravg=True``, else 0), ``npairs``, ``weightavg``,
        counted as Corrfunc counts: with ``autocorr=1`` each pair in both
        orders, and each point with itself (at separation 0) in a bucket
        that starts at 0.

    Examples
    --------
    >>> import numpy as np, twobs
    >>> x, y, z = np.random.default_rng(1).random((3, 1000))
    >>> dd = twobs.DD(1, 2, np.linspace(0.05, 0.3, 6), x, y, z, periodic=False)
    >>> dd["npairs"].shape
    (5,)
    """
    if periodic and boxsize is None:
        raise InputError("periodic=True needs boxsize (L, or (Lx, Ly, Lz))")
    session = _corrfunc_session(session, comm, nthreads)
    a, b = _catalogues(autocorr, X1, Y1, Z1, X2, Y2, Z2)
    edges = _edges_of(binfile)
    bins, lo, hi, log = _twobs.spacing_of(list(edges))
    params: dict = {"bins": bins, "r_min": lo, "r_max": hi}
    problem = "sdh"
    if periodic:
        params["box"] = _box_param(boxsize)[0]
        problem = "dd_periodic"
    npairs, weightavg, ravg, _ = _counted(session, problem, a, b, params, log, edges, (weights1, weights2),
                                          autocorr, weight_type, f64, average=output_ravg)
    out = np.zeros(len(edges) - 1, dtype=[("rmin", "f8"), ("rmax", "f8"), ("ravg", "f8"),
                                          ("npairs", "u8"), ("weightavg", "f8")])
    out["rmin"], out["rmax"], out["npairs"] = edges[:-1], edges[1:], npairs
    if weightavg is not None:
        out["weightavg"] = weightavg
    if ravg is not None:
        out["ravg"] = ravg
    return out


def _cells(problem: str, autocorr: int, nthreads: int, first: np.ndarray, second: dict, coords: tuple,
           weights: tuple, periodic: bool, boxsize: Any, weight_type: Optional[str], f64: bool,
           session: Optional[Session], comm: Any, average: bool) -> tuple:
    """(npairs, weightavg or None, the mean first-axis separation or None, the
    second axis's edges) of Corrfunc's 2-D pair counts."""
    if periodic and boxsize is None:
        raise InputError("periodic=True needs boxsize (L, or (Lx, Ly, Lz))")
    session = _corrfunc_session(session, comm, nthreads)
    a, b = _catalogues(autocorr, *coords)
    bins, lo, hi, log = _twobs.spacing_of(list(first))
    axis = "rp" if problem == "ddrppi" else "s"
    params: dict = {f"{axis}_bins": bins, f"{axis}_min": lo, f"{axis}_max": hi, **second}
    if periodic:
        params["box"] = _box_param(boxsize)[0]
    npairs, weightavg, avg, edges = _counted(session, problem, a, b, params, log, first, weights, autocorr,
                                             weight_type, f64, average=average)
    return npairs, weightavg, avg, np.asarray(edges[1], dtype=np.float64)


def _cells_table(names: tuple, edges: np.ndarray, second: np.ndarray, npairs: Any, weightavg: Any,
                 avg: Any) -> np.ndarray:
    """Corrfunc's structured array of 2-D cells, the first axis outer: its
    low and high edge, the mean first-axis separation (0 where not asked
    for), the second axis's upper edge, ``npairs`` and ``weightavg``, under
    Corrfunc's ``names``."""
    lo, hi, average, upper = names
    m = len(second) - 1
    out = np.zeros((len(edges) - 1) * m, dtype=[(lo, "f8"), (hi, "f8"), (average, "f8"), (upper, "f8"),
                                                ("npairs", "u8"), ("weightavg", "f8")])
    out[lo], out[hi] = np.repeat(edges[:-1], m), np.repeat(edges[1:], m)
    out[upper], out["npairs"] = np.tile(second[1:], len(edges) - 1), npairs
    if weightavg is not None:
        out["weightavg"] = weightavg
    if avg is not None:
        out[average] = avg
    return out


def _pi_bins(pimax: float, npibins: Optional[int]) -> int:
    """Corrfunc's pi buckets: 1 wide up to ``pimax`` unless ``npibins`` says how many."""
    if npibins is not None:
        return int(npibins)
    if float(pimax) != int(pimax):
        raise InputError(f"pimax={pimax}: pi buckets are 1 wide by default, which needs a whole pimax; give npibins")
    return int(pimax)


def DDrppi(autocorr: int, nthreads: int, pimax: float, binfile: Any, X1: Any, Y1: Any, Z1: Any, weights1: Any = None,
           periodic: bool = True, boxsize: Any = None, X2: Any = None, Y2: Any = None, Z2: Any = None,
           weights2: Any = None, verbose: bool = False, output_rpavg: bool = False, weight_type: Optional[str] = None,
           npibins: Optional[int] = None, f64: bool = False, session: Optional[Session] = None, comm: Any = None,
           **ignored: Any) -> np.ndarray:
    """Pair counts in cells of (rp, pi), in Corrfunc's shape (``Corrfunc.theory.DDrppi``).

    rp = sqrt(dx^2 + dy^2) over ``binfile``'s edges, pi = |dz| in
    ``npibins`` buckets over [0, pimax) (``int(pimax)`` of them, each 1
    wide, by default, as Corrfunc's). Parameters as :func:`DD`'s.

    Returns
    -------
    numpy structured array
        One row per cell, rp outer: ``rmin``, ``rmax``, ``rpavg`` (the mean
        rp of the cell's pairs with ``output_rpavg=True``, else 0),
        ``pimax`` (the cell's upper pi edge), ``npairs``, ``weightavg``;
        counted as :func:`DD` counts.
    """
    npibins = _pi_bins(pimax, npibins)
    edges = _edges_of(binfile)
    npairs, weightavg, avg, pi = _cells("ddrppi", autocorr, nthreads, edges,
                                        {"pi_bins": npibins, "pi_max": float(pimax)}, (X1, Y1, Z1, X2, Y2, Z2),
                                        (weights1, weights2), periodic, boxsize, weight_type, f64, session, comm,
                                        output_rpavg)
    return _cells_table(("rmin", "rmax", "rpavg", "pimax"), edges, pi, npairs, weightavg, avg)


def DDsmu(autocorr: int, nthreads: int, binfile: Any, mu_max: float, nmu_bins: int, X1: Any, Y1: Any, Z1: Any,
          weights1: Any = None, periodic: bool = True, boxsize: Any = None, X2: Any = None, Y2: Any = None,
          Z2: Any = None, weights2: Any = None, verbose: bool = False, output_savg: bool = False,
          weight_type: Optional[str] = None, f64: bool = False, session: Optional[Session] = None,
          comm: Any = None, **ignored: Any) -> np.ndarray:
    """Pair counts in cells of (s, mu), in Corrfunc's shape (``Corrfunc.theory.DDsmu``).

    s over ``binfile``'s edges, mu = |dz| / s (0 at s = 0) in ``nmu_bins``
    buckets over [0, mu_max). Parameters as :func:`DD`'s.

    Returns
    -------
    numpy structured array
        One row per cell, s outer: ``smin``, ``smax``, ``savg`` (the mean s
        of the cell's pairs with ``output_savg=True``, else 0), ``mu_max``
        (the cell's upper mu edge), ``npairs``, ``weightavg``; counted as
        :func:`DD` counts.
    """
    edges = _edges_of(binfile)
    npairs, weightavg, avg, mu = _cells("ddsmu", autocorr, nthreads, edges,
                                        {"mu_bins": int(nmu_bins), "mu_max": float(mu_max)},
                                        (X1, Y1, Z1, X2, Y2, Z2), (weights1, weights2), periodic, boxsize,
                                        weight_type, f64, session, comm, output_savg)
    return _cells_table(("smin", "smax", "savg", "mu_max"), edges, mu, npairs, weightavg, avg)


def _rows(x: Any) -> Optional[np.ndarray]:
    return None if x is None else np.ascontiguousarray(_host(x), dtype=np.float64)


def _box_text(boxsize: Any) -> Optional[str]:
    return None if boxsize is None else _box_param(boxsize)[0]


def xi(data: Any, randoms: Any, bins: Any, estimator: Optional[str] = None, data_weights: Any = None,
       random_weights: Any = None, norm: str = "pairs", boxsize: Any = None, radec: bool = False,
       patches: Any = None, f64: bool = False, session: Optional[Session] = None, comm: Any = None) -> dict:
    """The two-point correlation function of ``data`` against ``randoms``, as ``twobs xi`` computes it.

    Parameters
    ----------
    data, randoms : arrays of shape (n, 3)
        The catalogue and its randoms (RA and Dec in degrees, shape (n, 2),
        with ``radec=True``: xi is then w(theta) over angular buckets in degrees).
    bins : array
        The buckets' edges, evenly or log-evenly spaced.
    estimator : {"landy-szalay", "natural"}, optional
        Landy-Szalay by default (natural with ``boxsize``).
    data_weights, random_weights : arrays, optional
        A weight per point; a pair weighs the product.
    norm : {"pairs", "squared"}
        What a catalogue's counts are divided by: ``"pairs"``, (W^2 - sum w^2) / 2
        (N(N-1)/2 unweighted: Corrfunc's ``theory.xi``); ``"squared"``,
        W^2 / 2 (Corrfunc's ``convert_3d_counts_to_cf``, TreeCorr). W_D W_R between them.
    boxsize : float or (Lx, Ly, Lz), optional
        With ``randoms=None``: DD with minimum images in this periodic box
        and RR analytic (Corrfunc's ``theory.xi``), the natural estimator.
    patches : (data_patches, random_patches) or int, optional
        A patch number (0, 1, ...) per point of each catalogue, or a number
        of k-means patches of the data (each random in the patch of its
        nearest centre), as TreeCorr's ``npatch``: the jackknife covariance
        over the patches, as TreeCorr's ``var_method="jackknife"``.
    f64 : bool
        Separations in f64 on the points as given, on the CPU backend; by
        default points and edges are rounded to float32 once.

    Returns
    -------
    dict
        ``edges``, ``xi``, ``dd``, ``rr``, ``dr`` (None unless counted), and
        with ``patches`` the covariance ``cov``, ``xi_err`` and the patch
        numbers used, ``patches``.

    Examples
    --------
    >>> import numpy as np, twobs
    >>> rng = np.random.default_rng(1)
    >>> out = twobs.xi(rng.random((2000, 3)), rng.random((4000, 3)), np.geomspace(0.02, 0.2, 6))
    >>> sorted(k for k in out if out[k] is not None)
    ['dd', 'dr', 'edges', 'rr', 'xi']
    """
    session = _session(session, comm)
    return _xi(session, data, randoms, bins, patches, estimator=estimator, norm=norm,
               data_weights=_rows(data_weights), random_weights=_rows(random_weights), boxsize=_box_text(boxsize),
               radec=radec, f64=f64)


def _patches(patches: Any, data: Optional[np.ndarray], randoms: Optional[np.ndarray]) -> Optional[tuple]:
    """Each catalogue's patch numbers: as given, or ``npatch`` k-means patches of the data (TreeCorr's ``npatch``)."""
    if patches is None:
        return None
    if isinstance(patches, (int, np.integer)):
        if data is None or randoms is None or data.shape[1] != 3:
            raise InputError(f"patches={patches}: k-means patches need data and randoms of 3 values a point; "
                             "give (data_patches, random_patches) instead")
        d, r, _ = _twobs.kmeans_patches(data, randoms, int(patches))
        return d, r
    d, r = patches
    return (np.ascontiguousarray(_host(d), dtype=np.uint32), np.ascontiguousarray(_host(r), dtype=np.uint32))


def _xi(session: Session, data: Any, randoms: Any, edges: Any, patches: Any, **options: Any) -> dict:
    """``_twobs.xi`` on converted arrays; with patches, the patch numbers used (``patches``)."""
    data, randoms = _rows(data), _rows(randoms)
    numbers = _patches(patches, data, randoms)
    out = _twobs.xi(session._native, data, randoms, list(np.asarray(edges, dtype=np.float64)), patches=numbers,
                    **options)
    if numbers is not None:
        out["patches"] = numbers
    return out


def wp(data: Any, randoms: Any, rp_bins: Any, pimax: float, npibins: Optional[int] = None, boxsize: Any = None,
       estimator: Optional[str] = None, norm: str = "pairs", patches: Any = None, f64: bool = False,
       session: Optional[Session] = None, comm: Any = None) -> dict:
    """The projected correlation function wp(rp), as ``twobs xi --rp-pi`` computes it.

    DD, RR (and DR for Landy-Szalay, the default) counted exactly in cells
    of (rp, pi), pi = |dz| along z in ``npibins`` buckets over [0, pimax) (1
    wide by default), xi per cell as :func:`xi` estimates it, and wp = 2 sum
    over pi of xi dpi (Corrfunc's ``convert_rp_pi_counts_to_wp``). With
    ``randoms=None`` and ``boxsize``: DD with minimum images, RR analytic
    from each cell's volume (Corrfunc's ``theory.wp``).

    Returns
    -------
    dict
        ``rp_edges``, ``pi_edges``, ``wp``, and the cells' ``xi``, ``dd``,
        ``rr``, ``dr`` of shape (rp buckets, pi buckets); with ``patches``,
        ``cov`` (of xi's cells) and ``xi_err``.
    """
    session = _session(session, comm)
    second = ("pi", _pi_bins(pimax, npibins), float(pimax))
    out = _xi(session, data, randoms, rp_bins, patches, estimator=estimator, norm=norm, boxsize=_box_text(boxsize),
              second=second, f64=f64)
    out["rp_edges"], out["pi_edges"] = out.pop("edges"), out.pop("second_edges")
    out.pop("axes")
    return out


def xi_smu(data: Any, randoms: Any, s_bins: Any, nmu_bins: int, mu_max: float = 1.0, ells: Any = (0, 2, 4),
           boxsize: Any = None, estimator: Optional[str] = None, data_weights: Any = None,
           random_weights: Any = None, norm: str = "pairs", patches: Any = None, f64: bool = False,
           session: Optional[Session] = None, comm: Any = None) -> dict:
    """xi(s, mu) and its multipoles xi_l(s), as ``twobs xi --s-mu --multipoles`` computes them.

    DD, RR (and DR for Landy-Szalay, the default) counted exactly in cells
    of s over ``s_bins``' edges and mu = |dz| / s (z the line of sight) in
    ``nmu_bins`` buckets over [0, mu_max), xi per cell as :func:`xi`
    estimates it, and the multipoles xi_l(s) = (2l + 1) sum over mu of xi
    times the integral of the Legendre polynomial L_l over the cell. With
    ``randoms=None`` and ``boxsize``: DD with minimum images, RR analytic
    from each cell's volume (Corrfunc's ``theory.DDsmu`` counts).

    Parameters
    ----------
    data, randoms : arrays of shape (n, 3)
        The catalogue and its randoms.
    s_bins : array
        The s buckets' edges, evenly or log-evenly spaced.
    nmu_bins : int
        How many mu buckets over [0, mu_max).
    ells : sequence of int
        The multipoles' orders.
    patches : (data_patches, random_patches) or int, optional
        As :func:`xi`'s: jackknife covariances of the cells and of the
        multipoles.
    boxsize, estimator, data_weights, random_weights, norm, f64 :
        As :func:`xi`'s.

    Returns
    -------
    dict
        ``s_edges``, ``mu_edges``, the cells' ``xi``, ``dd``, ``rr``, ``dr``
        of shape (s buckets, mu buckets), ``ells`` and ``multipoles`` of
        shape (len(ells), s buckets); with ``patches``, ``cov`` and
        ``xi_err`` of the cells, ``multipoles_cov`` (l-major) and
        ``multipoles_err``.

    Examples
    --------
    >>> import numpy as np, twobs
    >>> rng = np.random.default_rng(1)
    >>> out = twobs.xi_smu(rng.random((2000, 3)), rng.random((4000, 3)), np.linspace(0.02, 0.2, 6), 10)
    >>> out["multipoles"].shape
    (3, 5)
    """
    session = _session(session, comm)
    second = ("mu", int(nmu_bins), float(mu_max))
    out = _xi(session, data, randoms, s_bins, patches, estimator=estimator, norm=norm,
              data_weights=_rows(data_weights), random_weights=_rows(random_weights), boxsize=_box_text(boxsize),
              second=second, f64=f64, ells=[int(ell) for ell in ells])
    out["s_edges"], out["mu_edges"] = out.pop("edges"), out.pop("second_edges")
    out.pop("axes")
    out.pop("wp")
    return out
