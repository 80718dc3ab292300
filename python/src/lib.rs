//! `twobs._twobs`: the engine as Python objects, a thin layer. Arrays come in
//! as numpy (the Python side makes them contiguous and of the spec's types),
//! problems and sessions are the library's own, the GIL is released while the
//! engine computes, and Ctrl-C stops the run (`twobs::stop`) and raises
//! KeyboardInterrupt. Every decision stays in the library.

mod science;

use std::sync::mpsc;
use std::time::Duration;

use numpy::{IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use twobs::backend::cuda::GpuError;
use twobs::backend::cuda::pinned::Registered;
use twobs::cache::Cache;
use twobs::data::{Column, DeviceInputs, DeviceSet, Inputs, Outside, PointSet, ProducerStream};
use twobs::data::{SetShape, Shapes};
use twobs::outcome::{Outcome, Totals};
use twobs::request::{BoxOrigin, Frame, Hint, Joined, Options, Placement, Points, Request, Shaping};
use twobs::run::{BackendChoice, Execution, Progress, Workers};
use twobs::schedule::{GpuOptions, Hybrid};
use twobs::spec::{Element, Output, Params, Scalar, Spacing};

create_exception!(
    _twobs,
    Error,
    PyException,
    "What twobs refused or could not do, with the same message as the command line."
);
create_exception!(
    _twobs,
    SpecError,
    Error,
    "A problem spec or its snippet is wrong (the message names the file, line and column)."
);
create_exception!(
    _twobs,
    InputError,
    Error,
    "Points, weights or parameters twobs cannot take (the message names the value)."
);

/// An anyhow-style chain of causes, one line, as the command line prints it.
fn message(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

fn spec_error(e: impl std::error::Error) -> PyErr {
    SpecError::new_err(message(&e))
}

fn input_error(e: impl std::error::Error) -> PyErr {
    InputError::new_err(message(&e))
}

/// A problem: a built-in, a spec file, or a spec and its snippet as text.
#[pyclass(frozen, subclass, module = "twobs._twobs")]
struct Problem {
    inner: twobs::spec::Problem,
}

/// Snippets of a spec given as text: the spec's `file` names them.
struct SnippetText {
    snippet: Option<String>,
}

impl twobs::spec::Files for SnippetText {
    fn read(&self, _path: &std::path::Path) -> Option<String> {
        self.snippet.clone()
    }
}

#[pymethods]
impl Problem {
    /// `Problem("sdh")`, `Problem("my.xml")`, or `Problem(spec_text, snippet=cuda_text)`:
    /// a text that starts with `<` is a spec, whose `<function file=...>` is the snippet given.
    #[new]
    #[pyo3(signature = (spec, snippet=None))]
    fn new(spec: &str, snippet: Option<String>) -> PyResult<Problem> {
        let inner = if spec.trim_start().starts_with('<') {
            let origin = std::path::Path::new("<spec text>");
            twobs::spec::Problem::parse(spec, origin, &SnippetText { snippet }).map_err(spec_error)?
        } else {
            if snippet.is_some() {
                return Err(PyValueError::new_err(
                    "snippet= goes with a spec given as text; a built-in or a spec file names its own snippet",
                ));
            }
            twobs::problems::load(spec).map_err(spec_error)?
        };
        Ok(Problem { inner })
    }

    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    #[getter]
    fn summary(&self) -> &str {
        &self.inner.summary
    }

    /// What the problem makes: count, sum, histogram, pairs or knn.
    #[getter]
    fn output(&self) -> &'static str {
        self.inner.output.kind()
    }

    /// The parameters: (name, type, default as text, description), in the spec's order.
    #[getter]
    fn params(&self) -> Vec<(String, String, String, String)> {
        self.inner
            .params
            .iter()
            .map(|p| (p.name.clone(), format!("{:?}", p.kind).to_lowercase(), p.default.to_string(), p.doc.clone()))
            .collect()
    }

    /// The scalar type of each component of a point, as numpy names it (the
    /// coordinates; a vector element repeats one type).
    #[getter]
    fn dtypes(&self) -> Vec<&'static str> {
        self.inner.input.element.components().iter().map(|c| numpy_name(c.scalar)).collect()
    }

    /// The names of a point's components, in order: a record's fields, or a
    /// vector's coordinates (x, y, z, ...).
    #[getter]
    fn fields(&self) -> Vec<String> {
        self.inner.input.element.components().into_iter().map(|c| c.name).collect()
    }

    /// Whether the element is a vector whose dimension the input decides.
    #[getter]
    fn dims_from_input(&self) -> bool {
        matches!(self.inner.input.element, Element::Vector { .. }) && self.inner.input.dims_from_input
    }

    /// One set, two sets, or either ("1", "2", "1,2").
    #[getter]
    fn sets(&self) -> &'static str {
        match (self.inner.input.either, self.inner.input.sets) {
            (true, _) => "1,2",
            (false, twobs::spec::Sets::One) => "1",
            (false, twobs::spec::Sets::Two) => "2",
        }
    }

    fn __repr__(&self) -> String {
        format!("twobs.Problem({:?}: {})", self.inner.name, self.inner.origin)
    }
}

fn numpy_name(s: Scalar) -> &'static str {
    match s {
        Scalar::F32 => "float32",
        Scalar::F64 => "float64",
        Scalar::I32 => "int32",
        Scalar::I64 => "int64",
        Scalar::U32 => "uint32",
    }
}

/// The extension's allocator: jemalloc, which keeps freed memory for a
/// session's next call (a page fault per 4 KiB touched afresh cost about
/// 3.7 us on the H200's host; Cargo.toml at the root says more). Python's
/// own allocations and numpy's keep theirs.
#[cfg(target_os = "linux")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Where a run goes and with what: kept for the session's life, with the
/// process's CUDA contexts, compiled kernels and CPU drivers (which the
/// engine keeps once per process) behind it.
#[pyclass(frozen, module = "twobs._twobs")]
struct Session {
    workers: Workers,
    /// Where its runs' progress is shown.
    watch: Watch,
    /// The options of the session's runs (a call sets `f64`).
    options: Options,
    /// The columns of the last calls' points, kept so that the next call
    /// copies its arrays into memory already touched (a fresh allocation
    /// pays a page fault per 4 KiB: 11 ms for a million 3-D points on a GPU host).
    pool: Pool,
    /// The boxes each problem ran with: a second box is read at run time (`run::Boxes`).
    boxes: twobs::run::Boxes,
    /// The specs the last calls ran, as the calls' arrays made them.
    specs: Specs,
}

/// A problem as a call's arrays make it (its sets, spacing and dims), and
/// its key for `run::Boxes`: kept for the problems a session's last calls
/// ran, so that the next call of the same problem and shape neither clones
/// the spec for each variant nor prints and hashes it again.
struct Variant {
    /// The Python object asked: held, so that its address names it alone.
    problem: Py<Problem>,
    sets: usize,
    log_bins: bool,
    dims: Option<u32>,
    spec: twobs::spec::Problem,
    key: twobs::cache::Key,
}

#[derive(Default)]
struct Specs(std::sync::Mutex<Vec<Variant>>);

/// Variants a session keeps (the problems of its last calls).
const KEPT_SPECS: usize = 8;

impl Specs {
    /// `problem` with `sets` sets (log-spaced, of points of `dims` values), and its key.
    fn variant(
        &self,
        problem: &Bound<'_, Problem>,
        sets: usize,
        log_bins: bool,
        dims: Option<u32>,
    ) -> PyResult<(twobs::spec::Problem, twobs::cache::Key)> {
        let same = |v: &Variant| {
            v.problem.as_ptr() == problem.as_ptr() && (v.sets, v.log_bins, v.dims) == (sets, log_bins, dims)
        };
        if let Some(v) = self.0.lock().expect("specs lock").iter().find(|v| same(v)) {
            return Ok((v.spec.clone(), v.key));
        }
        let mut spec = problem.get().inner.with_sets(sets).map_err(input_error)?;
        if log_bins {
            spec = spec.with_spacing(Spacing::Log).map_err(input_error)?;
        }
        if let (Element::Vector { .. }, Some(d)) = (&spec.input.element, dims) {
            spec = spec.with_dims(d).map_err(input_error)?;
        }
        let key = twobs::run::Boxes::key_of(&spec);
        let mut kept = self.0.lock().expect("specs lock");
        if kept.len() >= KEPT_SPECS {
            kept.remove(0);
        }
        let v = Variant { problem: problem.clone().unbind(), sets, log_bins, dims, spec: spec.clone(), key };
        kept.push(v);
        Ok((spec, key))
    }
}

/// Host buffers a session reuses: columns given back after each run. On a
/// GPU session the large ones are registered with the driver as they come
/// back (`cuda::pinned`), so that the next calls upload them at the bus's
/// speed: 1.2 MB of points took 0.2-0.27 ms from pageable memory on the H200's host.
#[derive(Default)]
struct Pool(std::sync::Mutex<Vec<Kept>>);

/// A kept column and its registration, declared first so that it is undone
/// before the column's memory is freed.
struct Kept {
    pin: Option<Registered>,
    column: Column,
}

/// Columns a pool keeps at most (the last calls' sets, weights included).
const POOL_COLUMNS: usize = 16;

/// Columns of fewer bytes are not registered: their copy is short either way.
const PINNED_BYTES: usize = 1 << 18;

impl Pool {
    /// A call's loan of columns.
    fn lend(&self) -> Loan<'_> {
        Loan { pool: self, pins: Vec::new() }
    }
}

/// A call's columns out of the pool, and the registrations of those that
/// had one, until they come back. A column that does not come back (a
/// refused call dropped it) has its registration undone when the loan ends,
/// before this call or any other uploads from where it lay.
struct Loan<'a> {
    pool: &'a Pool,
    /// By the column's address.
    pins: Vec<(usize, Registered)>,
}

impl Loan<'_> {
    /// An empty column of `scalar` with room for `n` values: a kept one where one is large enough.
    fn take(&mut self, scalar: Scalar, n: usize) -> Column {
        let mut kept = self.pool.0.lock().expect("pool lock");
        match kept.iter().position(|k| k.column.scalar() == scalar && k.column.capacity() >= n) {
            Some(k) => {
                let Kept { pin, mut column } = kept.swap_remove(k);
                column.clear();
                if let Some(pin) = pin {
                    self.pins.push((column.as_ptr() as usize, pin));
                }
                column
            }
            None => Column::with_capacity(scalar, n),
        }
    }

    /// The call's columns back into the pool, each with its registration, or
    /// a new one where `pin` (the session runs on a GPU) and the column is large.
    /// Returns why the driver refused a registration, where it did.
    fn give(mut self, columns: impl IntoIterator<Item = Column>, pin: bool) -> Option<String> {
        let mut refused = None;
        let back: Vec<Kept> = columns
            .into_iter()
            .map(|column| {
                let address = column.as_ptr() as usize;
                let bytes = column.capacity() * column.scalar().bytes() as usize;
                let pin = match self.pins.iter().position(|(a, _)| *a == address) {
                    Some(k) => Some(self.pins.swap_remove(k).1),
                    // SAFETY: the column's memory stays where it is while the pool keeps
                    // it, and a call that takes it out takes this registration with it.
                    None if pin && bytes >= PINNED_BYTES => unsafe { Registered::new(column.as_ptr().cast(), bytes) }
                        .map_err(|why| refused = Some(why))
                        .ok(),
                    None => None,
                };
                Kept { pin, column }
            })
            .collect();
        let mut kept = self.pool.0.lock().expect("pool lock");
        kept.extend(back);
        let extra = kept.len().saturating_sub(POOL_COLUMNS);
        kept.drain(..extra);
        refused
    }
}

#[pymethods]
impl Session {
    /// `comm`: (Fortran handle, rank, size, MPI library) of an mpi4py
    /// communicator, as the Python side reads them; its ranks share every run.
    #[new]
    #[pyo3(signature = (backend="auto", gpus=None, threads=0, streams=2, index="auto", verify=false, progress=None, comm=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        backend: &str,
        gpus: Option<Vec<usize>>,
        threads: usize,
        streams: usize,
        index: &str,
        verify: bool,
        progress: Option<Bound<'_, PyAny>>,
        comm: Option<(i64, usize, usize, String)>,
    ) -> PyResult<Session> {
        let backend = match backend {
            "auto" => BackendChoice::Auto,
            "cuda" | "gpu" => BackendChoice::Cuda,
            "cpu" => BackendChoice::Cpu,
            other => {
                return Err(PyValueError::new_err(format!(
                    "backend={other:?}: expected \"auto\" (the GPU when one is usable, else the CPU), \"cuda\" or \"cpu\""
                )));
            }
        };
        let index = match index {
            "auto" => twobs::index::IndexChoice::Auto,
            "grid" => twobs::index::IndexChoice::Grid,
            "none" => twobs::index::IndexChoice::None,
            "cells" => twobs::index::IndexChoice::Cells,
            other => {
                return Err(PyValueError::new_err(format!(
                    "index={other:?}: expected \"auto\", \"grid\", \"none\" or \"cells\""
                )));
            }
        };
        twobs::memory::check_threads(threads).map_err(|e| InputError::new_err(format!("threads={threads}: {e}")))?;
        if gpus.as_ref().is_some_and(Vec::is_empty) {
            return Err(PyValueError::new_err("gpus=[]: name at least one GPU, or leave gpus=None for all of them"));
        }
        let cache = Cache::user().map_err(|e| Error::new_err(message(&e)))?;
        let gpu = GpuOptions {
            gpus,
            block_points: None,
            streams: streams.max(1),
            forced: Default::default(),
            pool_pairs: None,
            piece_pairs: None,
            hybrid: Hybrid::Auto,
        };
        let ranks = comm.map(|c| ranks_of(py, c)).transpose()?;
        // `progress`: None or True, a line on sys.stderr for long runs; False, none; a callable, called.
        let watch = match &progress {
            Some(p) if p.is_callable() => {
                Watch { watched: Some(Default::default()), hook: Some(p.clone().unbind()), shown: Default::default() }
            }
            Some(p) if !p.is_truthy()? => Watch::off(),
            _ => Watch { watched: Some(Default::default()), hook: None, shown: Default::default() },
        };
        let progress = match &watch.watched {
            Some(w) => Progress::Watched(w.clone()),
            None => Progress::Off,
        };
        Ok(Session {
            workers: Workers { backend, threads, gpu, progress, cache, ranks, root_sends_points: false },
            watch,
            options: Options { index, verify, f64: false },
            pool: Pool::default(),
            boxes: Default::default(),
            specs: Specs::default(),
        })
    }

    /// Runs `problem` on set `a` (and `b`): each set a 2-D array (points x
    /// coordinates) of the element's type, or a list of 1-D columns (one per
    /// field of a record). Returns a dict of numpy arrays and the run's report (JSON text).
    #[pyo3(signature = (problem, a, b=None, params=Vec::new(), weights=Vec::new(), log_bins=false, outside_box=None, box_origin="corner", f64=false, ids=Vec::new(), exclude_same=None, drop_nonfinite=false, pair_weight=None))]
    #[allow(clippy::too_many_arguments)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        problem: &Bound<'py, Problem>,
        a: &Bound<'py, PyAny>,
        b: Option<&Bound<'py, PyAny>>,
        params: Vec<String>,
        weights: Vec<PyReadonlyArray1<'py, f64>>,
        log_bins: bool,
        outside_box: Option<&str>,
        box_origin: &str,
        f64: bool,
        ids: Vec<(String, Vec<PyReadonlyArray1<'py, i32>>)>,
        exclude_same: Option<String>,
        drop_nonfinite: bool,
        pair_weight: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let began = std::time::Instant::now();
        let mut loan = self.pool.lend();
        let call = Call {
            params,
            weights,
            log_bins,
            outside_box,
            box_origin,
            f64,
            ids,
            exclude_same,
            drop_nonfinite,
            pair_weight,
        };
        let made = self.request(problem, (a, b), &call, &mut loan);
        if let Some(h) = &self.workers.ranks {
            // Every rank must pass the same points: refused on every rank, with each odd one named.
            // A rank whose arrays were refused says why here too: the others would wait for it.
            let mine = match &made {
                Ok(request) => twobs::ranks::fingerprint(&request.frames()[0].inputs),
                Err(e) => format!("an error: {e}"),
            };
            let r = &*h.0;
            py.detach(|| twobs::run::agree(r, mine).map_err(|e| message(&e))).map_err(Error::new_err)?;
        }
        let mut request = made?;
        let registered = loan.pins.len();
        let taken_s = began.elapsed().as_secs_f64();
        let on_gpu = self.runs_on_gpu();
        #[allow(clippy::result_large_err, reason = "one result a call, sent once")]
        let computed = compute(py, (on_gpu, &self.watch), || twobs::run::execute(&request, &self.workers));
        let run_s = began.elapsed().as_secs_f64() - taken_s;
        let columns = |request: &mut Request| match &mut request.points {
            Points::Host(frames) => frames
                .iter_mut()
                .flat_map(|f| f.inputs.sets_mut())
                .flat_map(|s| std::mem::take(&mut s.columns))
                .collect(),
            _ => Vec::new(),
        };
        let mut exec = match computed {
            Ok(exec) => exec,
            Err(e) => {
                let _ = loan.give(columns(&mut request), on_gpu);
                return Err(e);
            }
        };
        let out = self.outcome(py, &request, &mut exec)?;
        let refused = loan.give(columns(&mut request), on_gpu);
        // Where a call's time went outside the engine: taking the arrays in
        // (copies, checks, the box) and giving the results out.
        let steps = serde_json::json!({
            "take_s": taken_s,
            "run_s": run_s,
            "give_s": began.elapsed().as_secs_f64() - taken_s - run_s,
            // Columns this call's points went into that were registered with the driver (`Pool`).
            "columns_registered": registered,
            // Why the driver refused to register a column kept for the next calls, where it did.
            "registration_refused": refused,
        });
        let mpi = self.workers.ranks.as_ref().map(|h| (h.0.rank(), h.0.size()));
        let name = request.problem.name.clone();
        out.set_item(
            "report",
            Report::later(move || {
                let mut report = report(&name, &exec, exec.notes.clone(), steps);
                if let Some((rank, size)) = mpi {
                    report["mpi"] = serde_json::json!({ "rank": rank, "size": size, "ranks": exec.ranks });
                }
                report
            }),
        )?;
        Ok(out)
    }

    /// Runs `problem` on points that lie on a GPU, read there (never through
    /// the host): `a` (and `b`) as `__cuda_array_interface__` describes an
    /// array: (address, (rows, components), typestr, strides in bytes or
    /// None for C order, stream or None). KNN lists of a search of rings stay
    /// on that GPU (`GpuArray`s); other results come back as numpy arrays.
    #[pyo3(signature = (problem, a, b=None, params=Vec::new(), log_bins=false))]
    fn run_on_gpu<'py>(
        &self,
        py: Python<'py>,
        problem: &Problem,
        a: GpuArg,
        b: Option<GpuArg>,
        params: Vec<String>,
        log_bins: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let began = std::time::Instant::now();
        let sets = 1 + b.is_some() as usize;
        let mut spec = problem.inner.with_sets(sets).map_err(input_error)?;
        if log_bins {
            spec = spec.with_spacing(Spacing::Log).map_err(input_error)?;
        }
        if let Element::Vector { .. } = &spec.input.element {
            spec = spec.with_dims(a.1.1 as u32).map_err(input_error)?;
        }
        let params = spec.bind(&params).map_err(input_error)?;
        let inputs = DeviceInputs { a: device_set(a, "set A")?, b: b.map(|b| device_set(b, "set B")).transpose()? };
        // Points on a GPU are never dropped: indices are as found.
        let most = inputs.sets().map(|s| s.rows).max().unwrap_or(0);
        let request = Request::on_gpu(spec.clone(), params.clone(), inputs, self.options);
        let taken_s = began.elapsed().as_secs_f64();
        #[allow(clippy::result_large_err, reason = "one result a call, sent once")]
        let mut exec = compute(py, (true, &self.watch), || twobs::run::execute(&request, &self.workers))?;
        let run_s = began.elapsed().as_secs_f64() - taken_s;
        let outcome = std::mem::replace(&mut exec.outcome, Outcome::Totals(Totals::Counts(Vec::new())));
        let out = result(py, &spec, &params, Rows::AsGiven { most }, outcome)?;
        // The host path's line for the same box (its points are not needed).
        if let (Output::Histogram { .. }, Some((volume, volume_from))) =
            (&spec.output, twobs::report::box_volume(&spec, &params))
        {
            out.set_item("volume", volume)?;
            out.set_item("volume_from", volume_from)?;
        }
        let steps = serde_json::json!({
            "take_s": taken_s,
            "run_s": run_s,
            "give_s": began.elapsed().as_secs_f64() - taken_s - run_s,
        });
        let name = spec.name.clone();
        out.set_item("report", Report::later(move || report(&name, &exec, exec.notes.clone(), steps)))?;
        Ok(out)
    }

    /// This session's rank and the number of ranks (0 and 1 without `comm`).
    #[getter]
    fn rank(&self) -> (usize, usize) {
        self.workers.ranks.as_ref().map_or((0, 1), |h| (h.0.rank(), h.0.size()))
    }

    /// The backend a run of this session takes when it starts now ("cuda" or "cpu").
    #[getter]
    fn backend(&self) -> &'static str {
        match self.workers.backend {
            BackendChoice::Cpu => "cpu",
            BackendChoice::Cuda => "cuda",
            BackendChoice::Auto => {
                match twobs::backend::cuda::usable().and_then(|()| Ok(twobs::backend::cuda::nvrtc::available()?)) {
                    Ok(()) => "cuda",
                    Err(_) => "cpu",
                }
            }
        }
    }
}

/// A call's arguments besides the problem and its points.
struct Call<'py, 'a> {
    params: Vec<String>,
    weights: Vec<PyReadonlyArray1<'py, f64>>,
    log_bins: bool,
    outside_box: Option<&'a str>,
    box_origin: &'a str,
    f64: bool,
    ids: Vec<(String, Vec<PyReadonlyArray1<'py, i32>>)>,
    exclude_same: Option<String>,
    drop_nonfinite: bool,
    pair_weight: Option<String>,
}

impl Session {
    /// The call's request: the problem as its arrays make it (the plain
    /// variants kept by the session), the points taken into the pool's
    /// columns, weights and ids joined, the box the session's runs read.
    fn request(
        &self,
        problem: &Bound<'_, Problem>,
        (a, b): (&Bound<'_, PyAny>, Option<&Bound<'_, PyAny>>),
        call: &Call<'_, '_>,
        loan: &mut Loan<'_>,
    ) -> PyResult<Request> {
        let sets = 1 + b.is_some() as usize;
        let (spec, key) = self.specs.variant(problem, sets, call.log_bins, dims_of(a)?)?;
        let plain = call.weights.is_empty()
            && call.ids.is_empty()
            && call.exclude_same.is_none()
            && !call.f64
            && call.pair_weight.is_none();
        let (spec, key) = match plain {
            true => (spec, key),
            false => {
                let extras = Shaping {
                    sets,
                    weighted: !call.weights.is_empty(),
                    ids: call.ids.iter().map(|(name, _)| name.clone()).collect(),
                    exclude_same: call.exclude_same.clone(),
                    f64: call.f64,
                    pair_weight: call.pair_weight.clone(),
                    ..Default::default()
                };
                let spec = extras.apply(&spec).map_err(input_error)?;
                let key = twobs::run::Boxes::key_of(&spec);
                (spec, key)
            }
        };
        let components = spec.input.element.components();
        let (a, a_shape) = point_set(a, &components, ("set A", call.drop_nonfinite), loan)?;
        let (b, b_shape) = match b {
            Some(b) => {
                let (set, shape) = point_set(b, &components, ("set B", call.drop_nonfinite), loan)?;
                (Some(set), Some(shape))
            }
            None => (None, None),
        };
        let shapes = match (a_shape, b_shape) {
            (Some(a), None) => Some(Shapes { a, b: None }),
            (Some(a), Some(Some(b))) => Some(Shapes { a, b: Some(b) }),
            _ => None,
        };
        let params = spec.bind(&call.params).map_err(input_error)?;
        let params = self.boxes.params_for_key(key, &spec, &params, call.f64);
        let placement = Placement { origin: box_origin(call.box_origin)?, outside: outside(call.outside_box)? };
        let joined = Joined {
            weights: call
                .weights
                .iter()
                .map(|w| Ok(Column::F64(w.as_slice().map_err(not_contiguous)?.to_vec())))
                .collect::<PyResult<_>>()?,
            ids: call
                .ids
                .iter()
                .map(|(name, arrays)| {
                    let columns =
                        arrays.iter().map(|x| Ok(Column::I32(x.as_slice().map_err(not_contiguous)?.to_vec())));
                    Ok((name.clone(), vec![columns.collect::<PyResult<Vec<_>>>()?]))
                })
                .collect::<PyResult<_>>()?,
        };
        let options = Options { f64: call.f64, ..self.options };
        let frame = Frame { params, inputs: Inputs { a, b }, shapes };
        Request::host(spec, vec![frame], joined, placement, options).map_err(|e| match e.hint() {
            // The library names no option: the wrapping it offers is outside_box="wrap" here.
            Some(Hint::WrapIntoBox) => InputError::new_err(format!("{e} (outside_box=\"wrap\")")),
            None => input_error(e),
        })
    }

    /// The run's outcome as numpy arrays (and a histogram's volume).
    fn outcome<'py>(&self, py: Python<'py>, request: &Request, exec: &mut Execution) -> PyResult<Bound<'py, PyDict>> {
        let mut outcome = std::mem::replace(&mut exec.outcome, Outcome::Totals(Totals::Counts(Vec::new())));
        let (spec, frame) = (&request.problem, &request.frames()[0]);
        // Under ranks: totals on every rank, pairs and KNN lists on rank 0 alone (as `comm.gather` gives).
        let mut held = true;
        if let Some(h) = &self.workers.ranks {
            let r = &*h.0;
            held = r.rank() == 0 || matches!(outcome, Outcome::Totals(_));
            outcome = py.detach(|| twobs::ranks::share_totals(r, outcome)).map_err(|e| Error::new_err(message(&e)))?;
        }
        let out = match held {
            true => result(py, spec, &frame.params, Rows::Of(&frame.inputs), outcome)?,
            false => elsewhere(py, spec)?,
        };
        if let Output::Histogram { .. } = spec.output {
            // What g(r) takes a frame's pair density over (a pass over the points where the box is open).
            let (volume, volume_from) = twobs::report::volume(spec, &frame.params, &frame.inputs);
            out.set_item("volume", volume)?;
            out.set_item("volume_from", volume_from)?;
            out.set_item("frame", frame_facts(py, request, volume)?)?;
        }
        Ok(out)
    }

    /// Whether a run of this session starts on a GPU (its caller then polls for the result).
    fn runs_on_gpu(&self) -> bool {
        self.backend() == "cuda"
    }
}

/// The ranks of an mpi4py communicator (collective: every rank of it calls).
#[cfg(feature = "mpi")]
fn ranks_of(py: Python<'_>, comm: (i64, usize, usize, String)) -> PyResult<twobs::ranks::Handle> {
    let (handle, rank, size, library) = comm;
    let world = py
        .detach(|| twobs::ranks::mpi::World::from_fortran(handle, rank, size, &library))
        .map_err(|e| Error::new_err(message(&e)))?;
    Ok(twobs::ranks::Handle(std::sync::Arc::new(world)))
}

/// A wheel without MPI refuses a communicator: each rank would run the whole problem alone.
#[cfg(not(feature = "mpi"))]
fn ranks_of(_py: Python<'_>, _comm: (i64, usize, usize, String)) -> PyResult<twobs::ranks::Handle> {
    Err(Error::new_err(
        "comm=: this twobs was built without MPI, and each rank would run the whole problem alone; build the package with its `mpi` feature (`maturin develop --features mpi`, or `MATURIN_PEP517_ARGS=\"--features mpi\" pip install .`) against the MPI mpi4py uses",
    ))
}

/// What g(r)'s conventions read of a frame (`twobs::rdf::FrameCounts`):
/// its sets, points, volume, and the ordered pairs an exclusion left out.
fn frame_facts<'py>(py: Python<'py>, request: &Request, volume: f64) -> PyResult<Bound<'py, PyDict>> {
    let (spec, inputs) = (&request.problem, &request.frames()[0].inputs);
    let one_set = inputs.b.is_none();
    let (points, queries) = (inputs.a.len() as u64, inputs.other().len() as u64);
    let excluded = spec.exclude.as_ref().map_or(0, |id| twobs::report::excluded_pairs(spec, id, inputs));
    // Ordered pairs, a point with itself included: each pair of one set from both ends, and its points.
    let excluded_ordered = match (spec.exclude.is_some(), one_set) {
        (false, _) => 0,
        (true, true) => 2 * excluded + points,
        (true, false) => excluded,
    };
    let d = PyDict::new(py);
    d.set_item("one_set", one_set)?;
    d.set_item("points", points)?;
    d.set_item("queries", queries)?;
    d.set_item("volume", volume)?;
    d.set_item("excluded_ordered", excluded_ordered)?;
    d.set_item("excluding", spec.exclude.is_some())?;
    Ok(d)
}

/// `outside_box=` as the engine takes it.
fn outside(given: Option<&str>) -> PyResult<Option<Outside>> {
    match given {
        None => Ok(None),
        Some("wrap") => Ok(Some(Outside::Wrap)),
        Some("refuse") => Ok(Some(Outside::Refuse)),
        Some(other) => Err(PyValueError::new_err(format!("outside_box={other:?}: expected \"wrap\" or \"refuse\""))),
    }
}

/// `box_origin=` as the engine takes it.
fn box_origin(given: &str) -> PyResult<BoxOrigin> {
    match given {
        "corner" => Ok(BoxOrigin::Corner),
        "center" | "centre" => Ok(BoxOrigin::Center),
        other => Err(PyValueError::new_err(format!(
            "box_origin={other:?}: expected \"corner\" (coordinates in [0, L)) or \"center\" (in [-L/2, L/2), freud's)"
        ))),
    }
}

/// A numpy array that is not one run of memory.
fn not_contiguous(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A rank's result of pairs or KNN lists, which rank 0 alone holds: the kind, and None for the arrays.
fn elsewhere<'py>(py: Python<'py>, problem: &twobs::spec::Problem) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("kind", problem.output.kind())?;
    let arrays: &[&str] = match problem.output {
        Output::Pairs { .. } => &["pairs"],
        _ => &["ids", "values", "k", "missing"],
    };
    for name in arrays {
        out.set_item(*name, py.None())?;
    }
    Ok(out)
}

/// The dimension of a 2-D array's points (None for a list of columns).
fn dims_of(set: &Bound<'_, PyAny>) -> PyResult<Option<u32>> {
    if set.is_instance_of::<PyList>() || set.is_instance_of::<PyTuple>() {
        return Ok(None);
    }
    let array = set.cast::<numpy::PyUntypedArray>().map_err(|_| {
        PyValueError::new_err("points: expected a 2-D numpy array (points x coordinates) or a list of 1-D columns")
    })?;
    match array.shape() {
        [_, d] => Ok(Some(*d as u32)),
        shape => Err(InputError::new_err(format!(
            "points of shape {shape:?}: expected a 2-D array, one row per point and one column per coordinate"
        ))),
    }
}

/// A set's points as the engine's columns, checked against the spec's
/// components, and its shape where the copy measured it.
fn point_set(
    set: &Bound<'_, PyAny>,
    components: &[twobs::spec::Component],
    (origin, drop_nonfinite): (&str, bool),
    loan: &mut Loan<'_>,
) -> PyResult<(PointSet, Option<SetShape>)> {
    let (columns, measured) = if set.is_instance_of::<PyList>() || set.is_instance_of::<PyTuple>() {
        let given: Vec<Bound<'_, PyAny>> = set.extract()?;
        if given.len() != components.len() {
            return Err(InputError::new_err(format!(
                "{origin}: {} columns, but the spec's element has {}",
                given.len(),
                components.len()
            )));
        }
        let columns = given.iter().zip(components).map(|(c, comp)| column(c, comp.scalar, origin));
        (columns.collect::<PyResult<Vec<_>>>()?, None)
    } else {
        matrix_columns(set, components[0].scalar, origin, loan)?
    };
    let set = PointSet { columns, origin: origin.to_owned(), rows: None };
    let (shape, finite) = measured.unzip();
    let set = set.validate_known(components, drop_nonfinite, finite).map_err(input_error)?;
    // Rows left out: the copy's measurements are of every row, so the run measures again.
    let shape = shape.filter(|_| set.rows.is_none());
    Ok((set, shape))
}

/// A 1-D array of `scalar`s as a column.
fn column(c: &Bound<'_, PyAny>, scalar: Scalar, origin: &str) -> PyResult<Column> {
    macro_rules! take {
        ($t:ty, $v:ident) => {{
            let a: PyReadonlyArray1<'_, $t> = c.extract().map_err(|_| wrong_type(origin, scalar))?;
            Column::$v(a.as_array().to_vec())
        }};
    }
    Ok(match scalar {
        Scalar::F32 => take!(f32, F32),
        Scalar::F64 => take!(f64, F64),
        Scalar::I32 => take!(i32, I32),
        Scalar::I64 => take!(i64, I64),
        Scalar::U32 => take!(u32, U32),
    })
}

/// A matrix's columns, and where the copy measured them, the set's shape and
/// whether every value is finite.
type MatrixColumns = (Vec<Column>, Option<(SetShape, bool)>);

/// A 2-D array's columns (the one copy a run makes of its points), into the
/// pool's buffers; for a C-order array, measured in the same pass
/// (`data::take_rows`): its shape as the planner reads it, and whether every value is finite.
fn matrix_columns(m: &Bound<'_, PyAny>, scalar: Scalar, origin: &str, loan: &mut Loan<'_>) -> PyResult<MatrixColumns> {
    macro_rules! take {
        ($t:ty, $v:ident) => {{
            let a: PyReadonlyArray2<'_, $t> = m.extract().map_err(|_| wrong_type(origin, scalar))?;
            let view = a.as_array();
            let (n, d) = view.dim();
            let mut cols: Vec<Vec<$t>> = (0..d)
                .map(|_| match loan.take(scalar, n) {
                    Column::$v(col) => col,
                    _ => unreachable!("the loan gives the scalar asked"),
                })
                .collect();
            match (a.is_c_contiguous(), a.as_slice()) {
                (true, Ok(rows)) => {
                    let taken = twobs::data::take_rows(rows, n, cols, origin);
                    (taken.set.columns, Some((taken.shape, taken.finite)))
                }
                // Column-major or strided (as_slice takes Fortran order too).
                _ => {
                    for (c, col) in cols.iter_mut().enumerate() {
                        col.extend(view.column(c).iter().copied());
                    }
                    (cols.into_iter().map(Column::$v).collect(), None)
                }
            }
        }};
    }
    Ok(match scalar {
        Scalar::F32 => take!(f32, F32),
        Scalar::F64 => take!(f64, F64),
        Scalar::I32 => take!(i32, I32),
        Scalar::I64 => take!(i64, I64),
        Scalar::U32 => take!(u32, U32),
    })
}

/// How many queries have fewer than `k` neighbours: lists run best first,
/// so a short one ends in u32::MAX (a pass over the last column alone).
/// A list of 16 ids is a cache line, so the last entries of a million lists
/// read all 64 MB (a numpy KNN call's hand-out took 4.2-7.0 ms on the
/// H200's host, this pass on one core): read on every core, 4096 lists at a time.
fn short_lists(ids: &[u32], k: usize) -> usize {
    use rayon::prelude::*;
    let k = k.max(1);
    ids.par_chunks(k * 4096).map(|lists| lists.chunks_exact(k).filter(|list| list[k - 1] == u32::MAX).count()).sum()
}

fn wrong_type(origin: &str, scalar: Scalar) -> PyErr {
    InputError::new_err(format!("{origin}: expected an array of {}", numpy_name(scalar)))
}

/// Runs on a thread of its own while this one waits without the GIL and
/// looks for Ctrl-C every 50 ms: then the run is asked to stop, its GPU
/// buffers are freed as it returns, and KeyboardInterrupt is raised. The
/// thread is one kept for runs (`Runner`): spawning one a call cost
/// 55-95 us on the development VM.
fn compute<T: Send>(
    py: Python<'_>,
    (on_gpu, watch): (bool, &Watch),
    run: impl FnOnce() -> Result<T, twobs::run::RunError> + Send,
) -> PyResult<T> {
    computed(py, (on_gpu, watch), run)?.map_err(run_error)
}

/// A session's view of its runs' progress: the counters the engine fills
/// (`run::Progress::Watched`), and who shows them: `hook(done, total)`, or a
/// line on Python's `sys.stderr` (a notebook's cell too), for runs the
/// schedule's rates say take more than `run::LONG_RUN_S`.
struct Watch {
    watched: Option<twobs::run::Watched>,
    hook: Option<Py<PyAny>>,
    /// Whether a line was written (and wants its end).
    shown: std::sync::atomic::AtomicBool,
}

impl Watch {
    fn off() -> Watch {
        Watch { watched: None, hook: None, shown: Default::default() }
    }

    /// Shows the run's progress, `began` ago, where it is long enough to.
    fn tick(&self, py: Python<'_>, began: std::time::Instant) -> PyResult<()> {
        let Some(w) = &self.watched else { return Ok(()) };
        let elapsed = began.elapsed().as_secs_f64();
        if w.estimate_s() <= twobs::run::LONG_RUN_S || elapsed < 0.5 {
            return Ok(());
        }
        let (done, total) = (w.bar.position(), w.bar.length().unwrap_or(0));
        if let Some(hook) = &self.hook {
            hook.call1(py, (done, total))?;
            return Ok(());
        }
        let share = done as f64 / total.max(1) as f64;
        let left =
            if share > 0.0 { format!("{:.0} s left", elapsed * (1.0 - share) / share) } else { "starting".into() };
        let line = format!("\rtwobs: {:>3.0}% of {total:.3e} pairs, {left}   ", 100.0 * share);
        py.import("sys")?.getattr("stderr")?.call_method1("write", (line,))?;
        self.shown.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Ends the line a run's progress was shown on.
    fn done(&self, py: Python<'_>) {
        if self.shown.swap(false, std::sync::atomic::Ordering::Relaxed) {
            let _ = py.import("sys").and_then(|s| s.getattr("stderr")).and_then(|e| e.call_method1("write", ("\n",)));
        }
    }
}

/// What a run's error is to Python: a refusal of the caller's points or
/// parameters is an `InputError`, anything else an `Error`.
fn run_error(e: twobs::run::RunError) -> PyErr {
    match &e {
        twobs::run::RunError::OutOfF32 { .. }
        | twobs::run::RunError::OnGpu(_)
        | twobs::run::RunError::Request(_)
        | twobs::run::RunError::Gpu(
            GpuError::Input(_)
            | GpuError::NotOnGpu { .. }
            | GpuError::SetsOnTwoGpus { .. }
            | GpuError::NotAsked { .. }
            | GpuError::NeedsHost(_),
        ) => input_error(e),
        _ => Error::new_err(message(&e)),
    }
}

/// [`compute`] of any work that returns its own error, which the caller turns into Python's.
fn computed<T: Send, E: Send>(
    py: Python<'_>,
    (on_gpu, watch): (bool, &Watch),
    run: impl FnOnce() -> Result<T, E> + Send,
) -> PyResult<Result<T, E>> {
    let began = std::time::Instant::now();
    let (done, mut finished) = mpsc::channel();
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        #[allow(clippy::result_large_err, reason = "one result a call, sent once")]
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| twobs::stop::watching(run)));
        let _ = done.send(ran);
    });
    // SAFETY: the job borrows from this call's frame; this function returns
    // only once the job has sent its result (below, the loop ends on the
    // message alone), and after its send the job touches nothing borrowed.
    let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
    let runner = Runner::take();
    runner.0.send(job).expect("a kept runner thread takes jobs while its sender lives");
    let mut interrupted = None;
    // A GPU run's first milliseconds are waited for by polling, as CUDA's
    // own synchronization waits where a core is free: a thread blocked on
    // the channel woke 40-70 us after the result on the H200's host, a
    // tenth of a short call's time outside its kernels. A CPU run's threads
    // take every core, so its caller blocks at once.
    let poll_until = on_gpu.then(|| std::time::Instant::now() + POLL);
    loop {
        // The receiver travels to the detached wait and back: it may not be shared.
        let (got, back) = py.detach(move || {
            while poll_until.is_some_and(|t| std::time::Instant::now() < t) {
                match finished.try_recv() {
                    Ok(got) => return (Ok(got), finished),
                    Err(mpsc::TryRecvError::Empty) => std::thread::yield_now(),
                    Err(mpsc::TryRecvError::Disconnected) => break,
                }
            }
            (finished.recv_timeout(Duration::from_millis(50)), finished)
        });
        finished = back;
        match got {
            Ok(Err(_panic)) => {
                watch.done(py);
                runner.give_back();
                return Err(interrupted.unwrap_or_else(|| {
                    Error::new_err("internal error: the run's thread panicked. This is a bug in twobs")
                }));
            }
            Ok(Ok(outcome)) => {
                watch.done(py);
                runner.give_back();
                if let Some(e) = interrupted {
                    return Err(e);
                }
                return Ok(outcome);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let shown = watch.tick(py, began);
                if interrupted.is_none()
                    && let Err(e) = shown.and_then(|()| py.check_signals())
                {
                    // Ctrl-C, or a progress hook that raised: the run stops and the error is raised.
                    twobs::stop::ask();
                    interrupted = Some(e);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                unreachable!("the job sends its result before it drops its sender, and it catches panics")
            }
        }
    }
}

/// How long a GPU run's caller polls for its result before it blocks.
const POLL: Duration = Duration::from_millis(10);

/// A job for a runner thread: a call's run, made 'static by `compute`'s waiting for it.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// A thread kept for runs, idle between calls; several at once where several
/// Python threads run at once. It belongs to the process that started it
/// (a child made by `fork` has none of its parent's threads).
struct Runner(mpsc::Sender<Job>, u32);

static IDLE_RUNNERS: std::sync::Mutex<Vec<Runner>> = std::sync::Mutex::new(Vec::new());

impl Runner {
    /// An idle runner of this process, or a new one.
    fn take() -> Runner {
        let process = std::process::id();
        let idle = IDLE_RUNNERS.lock().unwrap_or_else(|p| p.into_inner()).pop();
        if let Some(r) = idle.filter(|r| r.1 == process) {
            return r;
        }
        let (jobs, taken) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("twobs-run".into())
            .spawn(move || {
                for job in taken {
                    job();
                }
            })
            .expect("spawning a thread for twobs's runs");
        Runner(jobs, process)
    }

    fn give_back(self) {
        IDLE_RUNNERS.lock().unwrap_or_else(|p| p.into_inner()).push(self);
    }
}

/// A result's index as the caller's row.
type RowOf<'a> = Box<dyn Fn(u64) -> u64 + 'a>;

/// How a result's indices name the caller's rows.
enum Rows<'a> {
    /// Through the host sets' kept rows, where rows were dropped.
    Of(&'a Inputs),
    /// As the engine found them: points given on a GPU, of which the larger set has `most`.
    AsGiven { most: usize },
}

/// An array twobs left in a GPU's memory (KNN lists of points given on
/// it), which CuPy, PyTorch and Numba read in place through
/// `__cuda_array_interface__`: the memory lives while this object (or an
/// array made from it, which keeps it) does.
#[pyclass(frozen, module = "twobs._twobs")]
struct GpuArray {
    address: u64,
    shape: (usize, usize),
    typestr: &'static str,
    ordinal: usize,
    owner: std::sync::Arc<dyn std::any::Any + Send + Sync>,
}

#[pymethods]
impl GpuArray {
    /// Version 3 of the interface; the run's stream has finished, so no stream is named.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("shape", self.shape)?;
        d.set_item("typestr", self.typestr)?;
        d.set_item("data", (self.address, false))?;
        d.set_item("version", 3)?;
        d.set_item("strides", py.None())?;
        d.set_item("stream", py.None())?;
        Ok(d)
    }

    /// The GPU's ordinal.
    #[getter]
    fn device(&self) -> usize {
        self.ordinal
    }

    #[getter]
    fn shape(&self) -> (usize, usize) {
        self.shape
    }

    fn __repr__(&self) -> String {
        let _ = &self.owner;
        format!("twobs.GpuArray(GPU {}, shape {:?}, {})", self.ordinal, self.shape, self.typestr)
    }
}

/// The typestr of `scalar` (little-endian).
fn typestr_of(scalar: Scalar) -> &'static str {
    match scalar {
        Scalar::F32 => "<f4",
        Scalar::F64 => "<f8",
        Scalar::I32 => "<i4",
        Scalar::I64 => "<i8",
        Scalar::U32 => "<u4",
    }
}

/// A GPU array as `__cuda_array_interface__` gives it: (address, (rows,
/// components), typestr, strides in bytes (None: C order), stream (None: ready)).
type GpuArg = (u64, (usize, usize), String, Option<(i64, i64)>, Option<u64>);

/// A set of points on a GPU, from its interface.
fn device_set((address, (rows, components), typestr, strides, stream): GpuArg, origin: &str) -> PyResult<DeviceSet> {
    let given = match typestr.as_str() {
        "<f4" => Scalar::F32,
        "<f8" => Scalar::F64,
        "<i4" => Scalar::I32,
        "<i8" => Scalar::I64,
        other => {
            return Err(InputError::new_err(format!(
                "{origin}: a GPU array of typestr {other:?}; twobs reads little-endian float32, float64, int32 or int64 points there (<f4, <f8, <i4, <i8)"
            )));
        }
    };
    let width = given.bytes() as i64;
    let strides = strides.unwrap_or((components as i64 * width, width));
    Ok(DeviceSet {
        address,
        rows,
        components,
        given,
        strides: [strides.0, strides.1],
        stream: ProducerStream::from_interface(stream).map_err(|e| InputError::new_err(format!("{origin}: {e}")))?,
        origin: origin.to_owned(),
    })
}

/// The outcome as numpy arrays, with the histogram's edges: the engine's own
/// buffers handed to numpy where their layout allows (no copy), indices as
/// int32 where every index fits (u32::MAX, "no neighbour", reads as -1).
fn result<'py>(
    py: Python<'py>,
    problem: &twobs::spec::Problem,
    params: &Params,
    rows: Rows,
    outcome: Outcome,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("kind", problem.output.kind())?;
    // Indices are the engine's own where no row was dropped and all fit an int32.
    let (as_found, row_a, row_other): (bool, RowOf, RowOf) = match rows {
        Rows::Of(inputs) => {
            let other = inputs.other();
            let as_found =
                inputs.a.rows.is_none() && other.rows.is_none() && inputs.a.len().max(other.len()) <= i32::MAX as usize;
            (as_found, Box::new(|i| inputs.a.original_row(i)), Box::new(move |j| other.original_row(j)))
        }
        Rows::AsGiven { most } => (most <= i32::MAX as usize, Box::new(|i| i), Box::new(|j| j)),
    };
    match (outcome, &problem.output) {
        (Outcome::Totals(Totals::Counts(c)), Output::Count { .. }) => out.set_item("count", c[0])?,
        (Outcome::Totals(Totals::Sums(s)), Output::Sum) => out.set_item("sum", s[0])?,
        (Outcome::Totals(totals), Output::Histogram2d { .. }) => {
            // Cells (i, j) as a 2-D array, the first axis's bucket i the row.
            let axes = twobs::stage::contribution::histogram2d_axes(problem, params);
            let shape = [axes[0].1.len() - 1, axes[1].1.len() - 1];
            match totals {
                Totals::Counts(c) => out.set_item("counts", c.into_pyarray(py).reshape(shape)?)?,
                Totals::Sums(s) => out.set_item("sums", s.into_pyarray(py).reshape(shape)?)?,
            }
            let names: Vec<String> = axes.iter().map(|(name, _)| name.clone()).collect();
            let edges: Vec<Bound<'py, numpy::PyArray1<f64>>> =
                axes.into_iter().map(|(_, edges)| edges.into_pyarray(py)).collect();
            out.set_item("axes", names)?;
            out.set_item("edges", pyo3::types::PyTuple::new(py, edges)?)?;
        }
        (Outcome::Totals(totals), _) => {
            match totals {
                Totals::Counts(c) => out.set_item("counts", c.into_pyarray(py))?,
                Totals::Sums(s) => out.set_item("sums", s.into_pyarray(py))?,
            }
            let edges = twobs::stage::contribution::histogram_edges(problem, params);
            out.set_item("edges", edges.into_pyarray(py))?;
        }
        (Outcome::Pairs(pairs), _) => {
            let n = pairs.len();
            let mut parts = pairs.into_parts();
            let array = if as_found && parts.len() <= 1 {
                let flat: Vec<i32> = parts.pop().map_or(Vec::new(), |p| indices_as_i32(flatten(p)));
                flat.into_pyarray(py).reshape([n, 2])?.into_any()
            } else {
                let mut flat = Vec::with_capacity(2 * n);
                for [i, j] in parts.into_iter().flatten() {
                    flat.push(row_a(i as u64) as i64);
                    flat.push(row_other(j as u64) as i64);
                }
                flat.into_pyarray(py).reshape([n, 2])?.into_any()
            };
            out.set_item("pairs", array)?;
        }
        (Outcome::Knn { k, ids, values }, _) => {
            let queries = ids.len() / k.max(1);
            out.set_item("k", k)?;
            out.set_item("missing", short_lists(&ids, k))?;
            let ids = if as_found {
                // u32::MAX, "none", reads as -1.
                lend::<i32>(py, Column::U32(ids), queries, k)?
            } else {
                let rows: Vec<i64> =
                    ids.iter().map(|&j| if j == u32::MAX { -1 } else { row_other(j as u64) as i64 }).collect();
                rows.into_pyarray(py).reshape([queries, k])?.into_any()
            };
            out.set_item("ids", ids)?;
            out.set_item("values", knn_values(py, values, queries, k)?)?;
        }
        (Outcome::KnnOnGpu(lists), _) => {
            out.set_item("k", lists.k)?;
            // Counted where the lists lie, by the caller's array library.
            out.set_item("missing", py.None())?;
            let shape = (lists.queries, lists.k);
            let (ordinal, owner) = (lists.ordinal, lists.owner);
            // u32::MAX, "no neighbour", reads as -1.
            let ids = GpuArray { address: lists.ids, shape, typestr: "<i4", ordinal, owner: owner.clone() };
            let values = GpuArray { address: lists.values, shape, typestr: typestr_of(lists.value), ordinal, owner };
            out.set_item("ids", Bound::new(py, ids)?)?;
            out.set_item("values", Bound::new(py, values)?)?;
        }
    }
    Ok(out)
}

/// Pairs as one flat list of indices, in place.
fn flatten(pairs: Vec<[u32; 2]>) -> Vec<u32> {
    let mut pairs = std::mem::ManuallyDrop::new(pairs);
    let (ptr, len, cap) = (pairs.as_mut_ptr(), pairs.len(), pairs.capacity());
    // SAFETY: [u32; 2] is two u32s with u32's alignment; the allocation is handed over whole.
    unsafe { Vec::from_raw_parts(ptr as *mut u32, 2 * len, 2 * cap) }
}

/// Indices below 2^31 read as int32, in place (u32::MAX, "none", reads as -1).
fn indices_as_i32(v: Vec<u32>) -> Vec<i32> {
    let mut v = std::mem::ManuallyDrop::new(v);
    let (ptr, len, cap) = (v.as_mut_ptr(), v.len(), v.capacity());
    // SAFETY: u32 and i32 have one size and alignment; the allocation is handed over whole.
    unsafe { Vec::from_raw_parts(ptr as *mut i32, len, cap) }
}

fn knn_values<'py>(py: Python<'py>, values: Column, queries: usize, k: usize) -> PyResult<Bound<'py, PyAny>> {
    match values.scalar() {
        Scalar::F32 => lend::<f32>(py, values, queries, k),
        Scalar::F64 => lend::<f64>(py, values, queries, k),
        Scalar::I32 => lend::<i32>(py, values, queries, k),
        Scalar::I64 => lend::<i64>(py, values, queries, k),
        Scalar::U32 => lend::<u32>(py, values, queries, k),
    }
}

/// A column of results lent to numpy: the array's memory is the column's,
/// and when Python frees the array the column goes back to the engine
/// (`twobs::data::recycle`), whose next download of as many values lands
/// in memory already touched instead of faulting fresh pages.
#[pyclass(frozen, module = "twobs._twobs")]
struct Lent(std::sync::Mutex<Option<Column>>);

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(column) = self.0.get_mut().map(Option::take).unwrap_or(None) {
            twobs::data::recycle(column);
        }
    }
}

/// `column` (`rows` x `k` values, each of T's size) as a numpy array of T over its memory.
fn lend<'py, T: numpy::Element>(py: Python<'py>, column: Column, rows: usize, k: usize) -> PyResult<Bound<'py, PyAny>> {
    assert_eq!(column.scalar().bytes() as usize, std::mem::size_of::<T>(), "a view of values of one size");
    assert_eq!(column.len(), rows * k, "a full list per query");
    let ptr = column.as_ptr().cast::<T>();
    let lent = Bound::new(py, Lent(std::sync::Mutex::new(Some(column))))?;
    // SAFETY: rows x k values of T's size and alignment (u32 and i32 share both) at `ptr`: the
    // column's heap memory, which stays where it is while `lent`, the array's base, lives.
    let view = unsafe { numpy::ndarray::ArrayView2::from_shape_ptr((rows, k), ptr) };
    // SAFETY: as above; nothing moves or frees the column before `lent` is dropped.
    let array = unsafe { PyArray2::<T>::borrow_from_array(&view, lent.into_any()) };
    Ok(array.into_any())
}

/// A run's report (`report`), written as JSON text when first asked
/// (`str(report)`): most calls never read theirs, and building and writing
/// it took 40-55 us of each call on the development VM.
#[pyclass(frozen, module = "twobs._twobs")]
struct Report(std::sync::Mutex<Written>);

enum Written {
    Later(Box<dyn FnOnce() -> serde_json::Value + Send>),
    Text(String),
    /// Being written (only while the lock is held).
    Writing,
}

impl Report {
    fn later(build: impl FnOnce() -> serde_json::Value + Send + 'static) -> Report {
        Report(std::sync::Mutex::new(Written::Later(Box::new(build))))
    }
}

#[pymethods]
impl Report {
    /// The report as JSON text, the command line's.
    fn __str__(&self) -> String {
        let mut written = self.0.lock().expect("report lock");
        if let Written::Later(build) = std::mem::replace(&mut *written, Written::Writing) {
            *written = Written::Text(build().to_string());
        }
        match &*written {
            Written::Text(text) => text.clone(),
            _ => unreachable!("written above"),
        }
    }
}

/// What the run did, as the command line's JSON report says it.
fn report(problem: &str, exec: &Execution, notes: Vec<String>, steps: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "problem": problem,
        "backend": exec.backend.name(),
        "device": exec.device,
        "notes": notes,
        "pairs": exec.index.pairs.to_string(),
        "index": exec.index,
        "schedule": exec.schedule.iter().map(|(k, v)| (k.to_string(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
        "timings": exec.timings,
        "verified": exec.verified,
        "box_time": exec.box_time,
        "steps": steps,
    })
}

/// How many distinct generated programs (GPU kernels, CPU drivers and
/// probes) this process has compiled or loaded from the disk cache.
#[pyfunction]
fn programs() -> u64 {
    twobs::cache::programs()
}

/// The text of a file of the built-in problems (`rdf.cu`, `sdh.xml`, ...).
#[pyfunction]
fn built_in_file(name: &str) -> PyResult<&'static str> {
    twobs::problems::built_in_file(name)
        .ok_or_else(|| PyValueError::new_err(format!("{name:?} is no file of the built-in problems")))
}

/// Asks every run under way in this process to stop (what Ctrl-C does).
#[pyfunction]
fn stop() {
    twobs::stop::ask();
}

/// The `twobs` command of the package (`python/twobs/_cli.py`): the
/// command line on `args` (the program's name first), as the `twobs`
/// program runs it; its exit status. The process is the command's from
/// here on: it takes SIGINT, SIGTERM and SIGHUP to remove partial files,
/// and SIGPIPE's default.
#[pyfunction]
fn command_line(py: Python<'_>, args: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| twobs::cli::main(args))
}

#[pymodule]
fn _twobs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Messages name Python's options (`drop_nonfinite=True`), not the command line's.
    twobs::remedy::enter_through(twobs::remedy::Door::Python);
    m.add_class::<Problem>()?;
    m.add_class::<science::Rdf>()?;
    m.add_function(wrap_pyfunction!(science::xi, m)?)?;
    m.add_function(wrap_pyfunction!(science::kmeans_patches, m)?)?;
    m.add_function(wrap_pyfunction!(science::site_divisors, m)?)?;
    m.add_function(wrap_pyfunction!(science::corrfunc_table, m)?)?;
    m.add_function(wrap_pyfunction!(science::spacing_of, m)?)?;
    m.add_function(wrap_pyfunction!(science::box_of_dimensions, m)?)?;
    m.add_class::<Session>()?;
    m.add_class::<GpuArray>()?;
    m.add_class::<Report>()?;
    m.add_function(wrap_pyfunction!(stop, m)?)?;
    m.add_function(wrap_pyfunction!(built_in_file, m)?)?;
    m.add_function(wrap_pyfunction!(programs, m)?)?;
    m.add_function(wrap_pyfunction!(command_line, m)?)?;
    m.add("Error", m.py().get_type::<Error>())?;
    m.add("SpecError", m.py().get_type::<SpecError>())?;
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add("BUILT_IN", twobs::problems::BUILT_IN.to_vec())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // Whether `Session(comm=...)` can share runs between MPI ranks.
    m.add("MPI", cfg!(feature = "mpi"))?;
    Ok(())
}
