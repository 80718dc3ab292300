"""twobs: exact 2-body statistics on GPUs (and CPUs), from Python.

The engine is the same as the ``twobs`` command line's, and so are the
numbers: g(r) (:class:`RDF`, freud's shape), pair counts (:func:`DD`,
:func:`DDrppi`, :func:`DDsmu`, Corrfunc's shapes), xi (:func:`xi`), wp(rp) (:func:`wp`), xi(s, mu) and
its multipoles (:func:`xi_smu`), neighbours (:func:`query_pairs`,
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


from ._corrfunc import DD, DDrppi, DDsmu, wp, xi, xi_smu
from ._gofr import RDF
from ._neighbours import knn, query_pairs
from ._session import Problem, Result, Session, default_session, programs
from ._twobs import BUILT_IN, MPI, Error, InputError, SpecError, __version__

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
    "__version__",
    "default_session",
    "knn",
    "programs",
    "query_pairs",
    "wp",
    "xi",
    "xi_smu",
]
