//! The numbers the Python functions show, computed by the library: g(r) in
//! freud's and MDAnalysis's conventions (`twobs::rdf`), xi and wp with their
//! estimators, analytic RR and jackknife covariances (`twobs::xi`), and
//! Corrfunc's tables (`twobs::corrfunc`). The Python side converts arrays
//! and names results; nothing here decides what the engine does.

use std::sync::Mutex;

use numpy::{IntoPyArray, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{InputError, Session, computed, input_error, message, run_error};
use twobs::data::{Column, Inputs, PointSet};
use twobs::rdf::{Convention, FrameCounts, FreudMode, MdaNorm};
use twobs::spec::{Problem, Scalar, Spacing};
use twobs::xi::{Estimator, LineOfSight, Norm, XiError};

/// g(r) accumulated over frames: `Rdf("freud", "exact" | "finite_size",
/// bins, r_min, r_max)` or `Rdf("mdanalysis", "rdf" | "density" | "none",
/// ...)`; each `add(result)` takes one `Session.run` of a g(r) histogram as
/// a frame (whose edges, the thresholds the engine counted with, replace
/// the linear ones until then).
#[pyclass(frozen, module = "twobs._twobs")]
pub struct Rdf(Mutex<twobs::rdf::Rdf>);

#[pymethods]
impl Rdf {
    #[new]
    fn new(convention: &str, mode: &str, bins: usize, r_min: f64, r_max: f64) -> PyResult<Rdf> {
        let convention = match (convention, mode) {
            ("freud", "exact") => Convention::Freud(FreudMode::Exact),
            ("freud", "finite_size") => Convention::Freud(FreudMode::FiniteSize),
            ("freud", other) => {
                return Err(InputError::new_err(format!(
                    "normalization_mode='{other}': expected \"exact\" or \"finite_size\""
                )));
            }
            ("mdanalysis", "rdf") => Convention::MdAnalysis(MdaNorm::Rdf),
            ("mdanalysis", "density") => Convention::MdAnalysis(MdaNorm::Density),
            ("mdanalysis", "none") => Convention::MdAnalysis(MdaNorm::None),
            ("mdanalysis", other) => {
                return Err(InputError::new_err(format!("norm='{other}': expected \"rdf\", \"density\" or \"none\"")));
            }
            (other, _) => return Err(PyValueError::new_err(format!("convention {other:?}: freud or mdanalysis"))),
        };
        let edges = (0..=bins).map(|k| r_min + (r_max - r_min) * k as f64 / bins.max(1) as f64).collect();
        Ok(Rdf(Mutex::new(twobs::rdf::Rdf::new(convention, edges))))
    }

    /// Adds the histogram of one run (`Session.run`'s dict) as a frame.
    fn add(&self, result: &Bound<'_, PyDict>) -> PyResult<()> {
        let counts: PyReadonlyArray1<'_, u64> = item(result, "counts")?.extract()?;
        let edges: Vec<f64> = item(result, "edges")?.extract()?;
        let frame = item(result, "frame")?;
        let frame = frame.cast::<PyDict>()?;
        let mut rdf = self.0.lock().expect("rdf lock");
        if edges.len() != rdf.edges.len() {
            return Err(PyValueError::new_err("a run of other buckets than the accumulator's"));
        }
        // freud's edges are the f32 thresholds the engine counted with;
        // MDAnalysis's are its own f64 edges (np.histogram's), which its shells take.
        if matches!(rdf.convention, Convention::Freud(_)) {
            rdf.edges = edges;
        }
        rdf.add(FrameCounts {
            counts: counts.as_slice()?,
            one_set: item(frame, "one_set")?.extract()?,
            points: item(frame, "points")?.extract()?,
            queries: item(frame, "queries")?.extract()?,
            volume: item(frame, "volume")?.extract()?,
            excluded_ordered: item(frame, "excluded_ordered")?.extract()?,
            excluding: item(frame, "excluding")?.extract()?,
        });
        Ok(())
    }

    /// Forgets every frame.
    fn reset(&self) {
        let mut rdf = self.0.lock().expect("rdf lock");
        *rdf = twobs::rdf::Rdf::new(rdf.convention, rdf.edges.clone());
    }

    #[getter]
    fn frames(&self) -> u64 {
        self.0.lock().expect("rdf lock").frames
    }

    #[getter]
    fn counts<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArray1<u64>> {
        self.0.lock().expect("rdf lock").counts.clone().into_pyarray(py)
    }

    #[getter]
    fn edges<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArray1<f64>> {
        self.0.lock().expect("rdf lock").edges.clone().into_pyarray(py)
    }

    #[getter]
    fn centers<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArray1<f64>> {
        self.0.lock().expect("rdf lock").centers().into_pyarray(py)
    }

    #[getter]
    fn rdf<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArray1<f64>> {
        self.0.lock().expect("rdf lock").rdf().into_pyarray(py)
    }

    #[getter]
    fn n_r<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArray1<f64>> {
        self.0.lock().expect("rdf lock").n_r().into_pyarray(py)
    }
}

/// `key` of a run's result dict, which a g(r) run has.
fn item<'py>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Bound<'py, PyAny>> {
    d.get_item(key)?.ok_or_else(|| PyValueError::new_err(format!("a g(r) run's result has no `{key}`")))
}

/// The box parameter of MDAnalysis's `ts.dimensions` (a, b, c, alpha,
/// beta, gamma in degrees), as the built-ins' box takes it.
#[pyfunction]
pub fn box_of_dimensions(dimensions: [f64; 6]) -> PyResult<String> {
    Ok(twobs::data::md::Cell::from_dimensions(dimensions).map_err(input_error)?.param_text())
}

/// The buckets `edges` are, as the built-in histograms take them: (bins,
/// first edge, last edge, whether log-spaced).
#[pyfunction]
pub fn spacing_of(edges: Vec<f64>) -> PyResult<(u32, f64, f64, bool)> {
    let (bins, lo, hi, spacing) = Spacing::of_edges(&edges).map_err(InputError::new_err)?;
    Ok((bins, lo, hi, spacing == Spacing::Log))
}

/// Corrfunc's table of a run's histogram: `(npairs, weightavg or None,
/// the mean separation or None)` (`separations`: a run's sums of the pair
/// function per bucket, for `ravg`).
/// `autocorr`: one catalogue paired with itself (both orders, and each
/// point with itself in a first bucket that starts at 0: `self_weights`,
/// the catalogue's weights, or None unweighted, with `points` points).
#[pyfunction]
#[pyo3(signature = (counts, edges, sums=None, autocorr=true, points=0, self_weights=None, separations=None))]
#[allow(clippy::too_many_arguments, reason = "Python's keyword arguments")]
pub fn corrfunc_table<'py>(
    py: Python<'py>,
    counts: PyReadonlyArray1<'py, u64>,
    edges: Vec<f64>,
    sums: Option<PyReadonlyArray1<'py, f64>>,
    autocorr: bool,
    points: u64,
    self_weights: Option<PyReadonlyArray1<'py, f64>>,
    separations: Option<PyReadonlyArray1<'py, f64>>,
) -> PyResult<CorrfuncTable<'py>> {
    let own = (edges.first() == Some(&0.0)).then(|| twobs::corrfunc::SelfPairs {
        points,
        squared_weights: self_weights.as_ref().map_or(0.0, |w| w.as_array().iter().map(|x| x * x).sum()),
    });
    let sums = sums.as_ref().map(|s| s.as_slice()).transpose()?;
    let separations = separations.as_ref().map(|s| s.as_slice()).transpose()?;
    let table = twobs::corrfunc::table(counts.as_slice()?, (sums, separations), autocorr, own);
    let array = |v: Option<Vec<f64>>| v.map(|v| v.into_pyarray(py));
    Ok((table.npairs.into_pyarray(py), array(table.weightavg), array(table.avg)))
}

/// `(npairs, weightavg, avg)` of Corrfunc's table, as numpy arrays.
type CorrfuncTable<'py> = (
    Bound<'py, numpy::PyArray1<u64>>,
    Option<Bound<'py, numpy::PyArray1<f64>>>,
    Option<Bound<'py, numpy::PyArray1<f64>>>,
);

/// What xi is binned over besides its first axis.
fn second_axis(second: Option<(String, u32, f64)>) -> PyResult<Option<(LineOfSight, u32, f64)>> {
    match second {
        None => Ok(None),
        Some((axis, bins, most)) => match axis.as_str() {
            "pi" => Ok(Some((LineOfSight::Pi, bins, most))),
            "mu" => Ok(Some((LineOfSight::Mu, bins, most))),
            other => Err(PyValueError::new_err(format!("second axis {other:?}: pi or mu"))),
        },
    }
}

/// The estimator and norm Python names, checked against the catalogues.
fn estimator_and_norm(estimator: Option<&str>, norm: &str, periodic: bool) -> PyResult<(Estimator, Norm)> {
    let estimator = match estimator.map(|e| e.to_lowercase().replace('_', "-")) {
        None if periodic => Estimator::Natural,
        None => Estimator::LandySzalay,
        Some(e) if e == "natural" => Estimator::Natural,
        Some(e) if e == "landy-szalay" && periodic => {
            return Err(InputError::new_err(
                "estimator='landy-szalay' with boxsize: without randoms DR and RR are both analytic and Landy-Szalay is the natural estimator; leave estimator out",
            ));
        }
        Some(e) if e == "landy-szalay" => Estimator::LandySzalay,
        Some(e) => return Err(InputError::new_err(format!("estimator='{e}': expected 'landy-szalay' or 'natural'"))),
    };
    let norm = match norm {
        "pairs" => Norm::Pairs,
        "squared" => Norm::Squared,
        other => {
            return Err(InputError::new_err(format!(
                "norm='{other}': expected 'pairs' (N(N-1)/2) or 'squared' (N^2/2)"
            )));
        }
    };
    Ok((estimator, norm))
}

/// The built-in that counts xi's pairs, and its parameters for `edges`.
fn xi_problem(
    edges: &[f64],
    second: Option<(LineOfSight, u32, f64)>,
    boxsize: Option<&str>,
    radec: bool,
) -> PyResult<(Problem, Vec<String>)> {
    let (bins, lo, hi, spacing) = Spacing::of_edges(edges).map_err(InputError::new_err)?;
    let (name, axis) = match (second, boxsize, radec) {
        (Some((LineOfSight::Pi, ..)), _, _) => ("ddrppi", "rp"),
        (Some((LineOfSight::Mu, ..)), _, _) => ("ddsmu", "s"),
        (None, Some(_), _) => ("dd_periodic", "r"),
        (None, None, true) => ("ddtheta", "theta"),
        (None, None, false) => ("sdh", "r"),
    };
    let mut problem = twobs::problems::load(name).map_err(input_error)?;
    if spacing == Spacing::Log {
        problem = problem.with_spacing(Spacing::Log).map_err(input_error)?;
    }
    let count = if second.is_some() { format!("{axis}_bins") } else { "bins".to_owned() };
    let mut params = vec![format!("{count}={bins}"), format!("{axis}_min={lo:?}"), format!("{axis}_max={hi:?}")];
    match second {
        Some((LineOfSight::Pi, n, most)) => params.extend([format!("pi_bins={n}"), format!("pi_max={most:?}")]),
        Some((LineOfSight::Mu, n, most)) => params.extend([format!("mu_bins={n}"), format!("mu_max={most:?}")]),
        None => {}
    }
    params.extend(boxsize.map(|b| format!("box={b}")));
    Ok((problem, params))
}

/// A catalogue of `rows` (x, y, z, or RA and Dec in degrees with `radec`)
/// as the problem's points, with its weight column last where weighted.
fn catalogue(
    rows: &PyReadonlyArray2<'_, f64>,
    weights: Option<&PyReadonlyArray1<'_, f64>>,
    problem: &Problem,
    (radec, what): (bool, &str),
) -> PyResult<PointSet> {
    let view = rows.as_array();
    let (n, d) = view.dim();
    let want = if radec { 2 } else { 3 };
    if d != want {
        let shape = if radec { "RA and Dec in degrees, shape (n, 2)" } else { "shape (n, 3)" };
        return Err(InputError::new_err(format!("{what}: points of {d} values; expected {shape}")));
    }
    let scalar = if radec { Scalar::F64 } else { problem.input.element.components()[0].scalar };
    let columns: Vec<Column> = (0..d)
        .map(|c| {
            let values = view.column(c);
            match scalar {
                Scalar::F32 => Column::F32(values.iter().map(|&x| x as f32).collect()),
                _ => Column::F64(values.to_vec()),
            }
        })
        .collect();
    let mut set = PointSet { columns, origin: what.to_owned(), rows: None };
    let components: Vec<twobs::spec::Component> = match radec {
        true => ["ra", "dec"].map(|name| twobs::spec::Component { name: name.into(), scalar }).to_vec(),
        false => problem.input.element.components(),
    };
    set = set.validate(&components, false).map_err(input_error)?;
    if radec {
        set = twobs::xi::unit_vectors(&set).map_err(input_error)?;
    }
    if let Some(w) = weights {
        let w = w.as_slice()?;
        if w.len() != n {
            return Err(InputError::new_err(format!("{what}: {} weights for {n} points; give one per point", w.len())));
        }
        set.columns.push(Column::F64(w.to_vec()));
    }
    Ok(set)
}

/// MDAnalysis's `InterRDF_s` divisor of each bucket (`twobs::rdf::site_divisors`).
#[pyfunction]
pub fn site_divisors<'py>(
    py: Python<'py>,
    norm: &str,
    edges: Vec<f64>,
    volumes: Vec<f64>,
) -> PyResult<Bound<'py, numpy::PyArray1<f64>>> {
    let norm = match norm {
        "rdf" => MdaNorm::Rdf,
        "density" => MdaNorm::Density,
        "none" => MdaNorm::None,
        other => return Err(InputError::new_err(format!("norm='{other}': expected \"rdf\", \"density\" or \"none\""))),
    };
    Ok(twobs::rdf::site_divisors(norm, &edges, &volumes).into_pyarray(py))
}

/// `(data patches, random patches, centres)` as numpy arrays.
type KmeansPatches<'py> =
    (Bound<'py, numpy::PyArray1<u32>>, Bound<'py, numpy::PyArray1<u32>>, Bound<'py, numpy::PyArray2<f64>>);

/// `npatch` k-means patches of `data` (rows of 3 values), and each random
/// in its nearest patch: `(data patches, random patches, centres)`, as
/// TreeCorr's `npatch` (`twobs::xi::kmeans_patches`).
#[pyfunction]
#[pyo3(signature = (data, randoms, npatch, seed=1))]
pub fn kmeans_patches<'py>(
    py: Python<'py>,
    data: PyReadonlyArray2<'py, f64>,
    randoms: PyReadonlyArray2<'py, f64>,
    npatch: u32,
    seed: u64,
) -> PyResult<KmeansPatches<'py>> {
    let rows = |a: &PyReadonlyArray2<'py, f64>, what: &str| -> PyResult<Vec<[f64; 3]>> {
        let a = a.as_array();
        if a.ncols() != 3 {
            return Err(InputError::new_err(format!(
                "{what}: rows of 3 values for k-means patches, not {}",
                a.ncols()
            )));
        }
        Ok(a.rows().into_iter().map(|r| [r[0], r[1], r[2]]).collect())
    };
    let (d, r) = (rows(&data, "data")?, rows(&randoms, "randoms")?);
    let p =
        py.detach(|| twobs::xi::kmeans_patches(&d, &r, npatch, seed)).map_err(|e| InputError::new_err(message(&e)))?;
    let centres = numpy::PyArray2::from_vec2(py, &p.centres.iter().map(|c| c.to_vec()).collect::<Vec<_>>())?;
    Ok((p.data.into_pyarray(py), p.randoms.into_pyarray(py), centres))
}

/// xi (or w(theta), or xi(rp, pi) and wp(rp), or xi(s, mu)) of `data`
/// against `randoms`, or in the periodic box `boxsize` with RR analytic, as
/// `twobs xi` computes it; with patches, the jackknife covariance.
#[pyfunction]
#[pyo3(signature = (session, data, randoms, edges, estimator=None, norm="pairs", data_weights=None, random_weights=None, boxsize=None, radec=false, second=None, patches=None, f64=false, ells=None))]
#[allow(clippy::too_many_arguments)]
pub fn xi<'py>(
    py: Python<'py>,
    session: &Session,
    data: PyReadonlyArray2<'py, f64>,
    randoms: Option<PyReadonlyArray2<'py, f64>>,
    edges: Vec<f64>,
    estimator: Option<&str>,
    norm: &str,
    data_weights: Option<PyReadonlyArray1<'py, f64>>,
    random_weights: Option<PyReadonlyArray1<'py, f64>>,
    boxsize: Option<String>,
    radec: bool,
    second: Option<(String, u32, f64)>,
    patches: Option<(PyReadonlyArray1<'py, u32>, PyReadonlyArray1<'py, u32>)>,
    f64: bool,
    ells: Option<Vec<u32>>,
) -> PyResult<Bound<'py, PyDict>> {
    let periodic = boxsize.is_some();
    if periodic == randoms.is_some() {
        return Err(InputError::new_err(
            "give randoms, or boxsize (a periodic box, RR analytic) instead of randoms; not both",
        ));
    }
    let (estimator, norm) = estimator_and_norm(estimator, norm, periodic)?;
    if periodic && random_weights.is_some() {
        return Err(InputError::new_err("random_weights with boxsize: the randoms are analytic"));
    }
    if radec && periodic {
        return Err(InputError::new_err("radec=True with boxsize: angles on the sky have no periodic box"));
    }
    let weighted = data_weights.is_some() || random_weights.is_some();
    if weighted && !periodic && (data_weights.is_none() || random_weights.is_none()) {
        return Err(InputError::new_err("weights for one catalogue only: give both (ones for unweighted randoms)"));
    }
    let second = second_axis(second)?;
    if ells.is_some() && !matches!(second, Some((LineOfSight::Mu, ..))) {
        return Err(InputError::new_err("ells: multipoles are of xi(s, mu) (twobs.xi_smu)"));
    }
    let (problem, params) = xi_problem(&edges, second, boxsize.as_deref(), radec)?;
    // f64: the points and edges as given, not rounded to f32 (`Problem::in_f64`).
    let problem = if f64 { problem.in_f64() } else { problem };
    let params = problem.bind(&params).map_err(input_error)?;
    let data = Inputs { a: catalogue(&data, data_weights.as_ref(), &problem, (radec, "data"))?, b: None };
    let randoms = match &randoms {
        Some(r) => Some(Inputs { a: catalogue(r, random_weights.as_ref(), &problem, (radec, "randoms"))?, b: None }),
        None => None,
    };
    let patches = match &patches {
        Some((d, r)) => Some((d.as_slice()?.to_vec(), r.as_slice()?.to_vec())),
        None => None,
    };
    let on = (twobs::request::Options { f64, ..session.options }, &session.workers);
    let los = second.map(|(los, ..)| los);
    #[allow(clippy::result_large_err, reason = "the run's own error, once per call")]
    let counted = computed(py, (session.runs_on_gpu(), &session.watch), || -> Result<_, XiError> {
        let (counts, _) = twobs::xi::count_cells(&problem, &params, &data, randoms.as_ref(), estimator, los, on)?;
        let jackknife = match (&patches, &randoms) {
            (Some((dp, rp)), Some(r)) => {
                Some(twobs::xi::jackknife(&problem, &params, (&data, dp), Some((r, rp)), estimator, norm, &counts, on)?)
            }
            (Some(_), None) => return Err(twobs::xi::PatchError::Analytic.into()),
            (None, _) => None,
        };
        Ok((counts, jackknife))
    })?;
    let (counts, jackknife) = counted.map_err(|e| match e {
        XiError::Run(e) => run_error(e),
        e => InputError::new_err(message(&e)),
    })?;
    let out = xi_result(py, &counts, estimator, norm, jackknife.as_ref())?;
    if let Some(ells) = ells {
        multipoles_result(&out, &counts, (estimator, norm), &ells, jackknife.as_ref())?;
    }
    Ok(out)
}

/// The multipoles of xi(s, mu) for `ells`, shape (ells, s buckets), and
/// with a jackknife their covariance over (l, s) flattened l-major.
fn multipoles_result<'py>(
    out: &Bound<'py, PyDict>,
    counts: &twobs::xi::PairCounts,
    (estimator, norm): (Estimator, Norm),
    ells: &[u32],
    jackknife: Option<&twobs::xi::Jackknife>,
) -> PyResult<()> {
    let py = out.py();
    let flat = |xi: &[f64]| -> Vec<f64> {
        counts.multipoles(xi, ells).expect("(s, mu) cells, checked above").into_iter().flatten().collect()
    };
    let rows = [ells.len(), counts.edges.len() - 1];
    out.set_item("ells", ells.to_vec())?;
    out.set_item("multipoles", flat(&counts.xi(estimator, norm)).into_pyarray(py).reshape(rows)?)?;
    if let Some(j) = jackknife {
        let samples: Vec<Vec<f64>> = j.xi.iter().map(|xi| flat(xi)).collect();
        let cov = twobs::xi::jackknife_covariance(&samples);
        let n = cov.len();
        let errors: Vec<f64> = (0..n).map(|i| cov[i][i].sqrt()).collect();
        out.set_item(
            "multipoles_cov",
            cov.into_iter().flatten().collect::<Vec<f64>>().into_pyarray(py).reshape([n, n])?,
        )?;
        out.set_item("multipoles_err", errors.into_pyarray(py).reshape(rows)?)?;
    }
    Ok(())
}

/// xi's counts and estimate as Python's dict: 2-D cells as (first axis,
/// second axis) arrays, with wp(rp) for (rp, pi).
fn xi_result<'py>(
    py: Python<'py>,
    counts: &twobs::xi::PairCounts,
    estimator: Estimator,
    norm: Norm,
    jackknife: Option<&twobs::xi::Jackknife>,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let xi = counts.xi(estimator, norm);
    let wp = counts.wp(&xi);
    let shape = counts.cells.as_ref().map(|(_, second)| [counts.edges.len() - 1, second.len() - 1]);
    let array = |v: Vec<f64>| -> PyResult<Bound<'py, PyAny>> {
        let a = v.into_pyarray(py);
        Ok(match shape {
            Some(s) => a.reshape(s)?.into_any(),
            None => a.into_any(),
        })
    };
    out.set_item("edges", counts.edges.clone().into_pyarray(py))?;
    if let Some((los, second)) = &counts.cells {
        out.set_item("axes", los.axes().to_vec())?;
        out.set_item("second_edges", second.clone().into_pyarray(py))?;
    }
    out.set_item("xi", array(xi)?)?;
    out.set_item("dd", array(counts.dd.clone())?)?;
    out.set_item("rr", array(counts.rr(norm))?)?;
    out.set_item("dr", counts.dr().map(|dr| array(dr.to_vec())).transpose()?)?;
    out.set_item("wp", wp.map(|w| w.into_pyarray(py)))?;
    if let Some(j) = jackknife {
        let n = j.covariance.len();
        let flat: Vec<f64> = j.covariance.iter().flatten().copied().collect();
        out.set_item("cov", flat.into_pyarray(py).reshape([n, n])?)?;
        out.set_item("xi_err", (0..n).map(|i| j.covariance[i][i].sqrt()).collect::<Vec<f64>>().into_pyarray(py))?;
    }
    Ok(out)
}
