//! A request: everything a run needs, checked once. The command line and
//! the Python package build it through the same constructors (ripgrep's
//! `LowArgs -> HiArgs`): [`Shaping::apply`] makes the problem the inputs
//! ask for, and [`Request::host`] (or [`Request::on_gpu`]) joins the points,
//! their weights and ids, places them in the periodic box and checks that
//! every part agrees with the problem. A run ([`crate::run::execute`]) may
//! assume what it is given is whole and consistent.

use crate::data::{Column, DeviceInputs, InputError, Inputs, Outside, PointSet, Shapes};
use crate::index::IndexChoice;
use crate::spec::{Element, Output, ParamError, Params, Problem, Sets, Spacing};

/// Why a request could not be made, with what the caller gave. The library
/// names no option of the command line or of Python: each caller adds its
/// own spelling of [`RequestError::hint`].
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Param(#[from] ParamError),
    #[error(transparent)]
    Input(#[from] InputError),
    /// Points outside the periodic box that were not wrapped.
    #[error("{0}")]
    Outside(InputError),
    #[error("{0}")]
    Refused(String),
}

/// An option of the caller that would have made a refused request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// Have points outside the box wrapped into it.
    WrapIntoBox,
}

impl RequestError {
    /// The caller's option that would have made the request, where one would.
    pub fn hint(&self) -> Option<Hint> {
        match self {
            RequestError::Outside(_) => Some(Hint::WrapIntoBox),
            _ => None,
        }
    }
}

macro_rules! refused {
    ($($t:tt)*) => { RequestError::Refused(format!($($t)*)) };
}

/// What the inputs make of a problem: how many sets, the buckets' spacing,
/// the points' dimension, and the columns joined to the points.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shaping {
    pub sets: usize,
    pub log_bins: bool,
    /// Values per point, where the problem takes its dimension from the input.
    pub dims: Option<u32>,
    /// A weight per point (histograms and sums).
    pub weighted: bool,
    /// Integer ids per point, by name (`<id name=...>`).
    pub ids: Vec<String>,
    /// Pairs whose points share this id are left out.
    pub exclude_same: Option<String>,
    /// Each pair adds this function of the snippet to its bucket in place of
    /// 1 (`Problem::with_pair_weight`: the pair function gives the sums
    /// behind Corrfunc's `ravg`).
    pub pair_weight: Option<String>,
    /// f64 arithmetic on f64 points: the spec's f32 element, parameters and
    /// value read as f64 (`Problem::in_f64`), so that points and parameters
    /// are taken as given, not rounded to f32.
    pub f64: bool,
}

impl Shaping {
    /// The problem as these inputs make it.
    pub fn apply(&self, problem: &Problem) -> Result<Problem, RequestError> {
        let mut p = problem.with_sets(self.sets)?;
        if self.log_bins {
            p = p.with_spacing(Spacing::Log)?;
        }
        if let (Element::Vector { .. }, Some(d)) = (&p.input.element, self.dims) {
            p = p.with_dims(d)?;
        }
        if let Some(function) = &self.pair_weight {
            p = p.with_pair_weight(function)?;
        }
        if self.weighted {
            p = p.with_point_weights()?;
        }
        for name in &self.ids {
            p = p.with_id(name)?;
        }
        if let Some(name) = &self.exclude_same {
            p = p.with_exclusion(name)?;
        }
        if self.f64 {
            p = p.in_f64();
        }
        Ok(p)
    }
}

/// How a run is computed, besides who computes it (`run::Workers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Whether a cut-off problem visits only the pairs of neighbouring cells, and how.
    pub index: IndexChoice,
    /// Re-compute on the CPU backend and fail on any difference.
    pub verify: bool,
    /// The CPU backend in double precision.
    pub f64: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { index: IndexChoice::Auto, verify: false, f64: false }
    }
}

/// Where a periodic box's corner lies: at the origin (the spec's box, LAMMPS,
/// GROMACS), or centred on it (freud, HOOMD-blue: coordinates in [-L/2, L/2)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BoxOrigin {
    #[default]
    Corner,
    Center,
}

/// How points meet a periodic box: where the box lies, and what becomes of
/// points outside it (None: wrapped where at most half of a set lies
/// outside, the set refused where more do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Placement {
    pub origin: BoxOrigin,
    pub outside: Option<Outside>,
}

/// One frame of host points: its parameters (its own box where the frames'
/// boxes differ), its sets, and their shapes where the caller measured them
/// as it took the points (`data::take_rows`).
#[derive(Debug, Clone)]
pub struct Frame {
    pub params: Params,
    pub inputs: Inputs,
    pub shapes: Option<Shapes>,
}

/// Columns joined to every frame's sets after the points: a weight column
/// per set (a trajectory's weights are its atoms'), then each id's columns:
/// a column per set, for every frame or one list a frame (atoms chosen by
/// type may differ from frame to frame).
#[derive(Debug, Clone, Default)]
pub struct Joined {
    pub weights: Vec<Column>,
    pub ids: Vec<(String, Vec<Vec<Column>>)>,
}

/// Where a request's points lie.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant, reason = "one per run")]
pub enum Points {
    /// Frames of sets in host memory; most runs have one, and a
    /// trajectory's totals add over its frames.
    Host(Vec<Frame>),
    /// Sets in a GPU's memory (another library's arrays).
    Device { params: Params, inputs: DeviceInputs },
    /// An MPI rank other than 0 of a run whose rank 0 read the inputs:
    /// they come from it when the run starts.
    FromRoot { params: Params },
}

/// Everything a run needs, checked.
#[derive(Debug, Clone)]
pub struct Request {
    /// The problem as the inputs make it ([`Shaping::apply`]).
    pub problem: Problem,
    pub points: Points,
    pub options: Options,
    /// What making the request did (points wrapped into the box, one
    /// kernel for several boxes), said with the run's notes.
    pub notes: Vec<String>,
}

impl Request {
    /// A request over host points: `frames` in order, each with its
    /// parameters; `joined`'s columns added to every frame's sets; points
    /// placed in the periodic box as `placement` says.
    pub fn host(
        problem: Problem,
        mut frames: Vec<Frame>,
        joined: Joined,
        placement: Placement,
        options: Options,
    ) -> Result<Request, RequestError> {
        check_frames(&problem, &frames)?;
        let mut notes = one_kernel_for_boxes(&problem, &mut frames);
        notes.extend(into_box(&problem, &mut frames, placement)?);
        join(&problem, &mut frames, joined)?;
        Ok(Request { problem, points: Points::Host(frames), options, notes })
    }

    /// A request of one frame whose sets carry every column the problem
    /// reads (weights and ids too, in the problem's order), inside its
    /// periodic box already: the library's own runs (xi's counts) and tests.
    pub fn of_columns(
        problem: Problem,
        params: Params,
        inputs: Inputs,
        options: Options,
    ) -> Result<Request, RequestError> {
        let columns = problem.input.components().len();
        for set in inputs.sets() {
            if set.columns.len() != columns {
                return Err(refused!(
                    "{}: {} columns for problem `{}`, whose points read {columns}",
                    set.origin,
                    set.columns.len(),
                    problem.name
                ));
            }
        }
        let frames = vec![Frame { params, inputs, shapes: None }];
        check_frames(&problem, &frames)?;
        Ok(Request { problem, points: Points::Host(frames), options, notes: Vec::new() })
    }

    /// A request over sets that lie on a GPU.
    pub fn on_gpu(problem: Problem, params: Params, inputs: DeviceInputs, options: Options) -> Request {
        Request { problem, points: Points::Device { params, inputs }, options, notes: Vec::new() }
    }

    /// An MPI rank's request whose points rank 0 sends when the run starts.
    pub fn from_root(problem: Problem, params: Params, options: Options) -> Request {
        Request { problem, points: Points::FromRoot { params }, options, notes: Vec::new() }
    }

    /// The host frames (none for points elsewhere).
    pub fn frames(&self) -> &[Frame] {
        match &self.points {
            Points::Host(frames) => frames,
            _ => &[],
        }
    }

    /// The first frame's parameters (every frame's, where their boxes agree).
    pub fn params(&self) -> &Params {
        match &self.points {
            Points::Host(frames) => &frames[0].params,
            Points::Device { params, .. } | Points::FromRoot { params } => params,
        }
    }
}

/// At least one frame, several only for totals, each of the problem's sets.
fn check_frames(problem: &Problem, frames: &[Frame]) -> Result<(), RequestError> {
    if frames.is_empty() {
        return Err(refused!("no points: a run takes at least one frame of one set"));
    }
    if frames.len() > 1 && !adds_over_frames(&problem.output) {
        return Err(refused!(
            "{} frames: frames add up for counts, sums and histograms, but problem `{}` makes {}; run each frame alone",
            frames.len(),
            problem.name,
            problem.output.kind()
        ));
    }
    for (f, frame) in frames.iter().enumerate() {
        let want = match problem.input.sets {
            Sets::One => 1,
            Sets::Two => 2,
        };
        let have = 1 + frame.inputs.b.is_some() as usize;
        if have != want {
            return Err(refused!(
                "frame {f}: {have} set(s) of points for problem `{}`, which takes {want}",
                problem.name
            ));
        }
    }
    Ok(())
}

/// Whether an output adds over a trajectory's frames.
fn adds_over_frames(output: &Output) -> bool {
    matches!(output, Output::Count { .. } | Output::Sum | Output::Histogram { .. } | Output::Histogram2d { .. })
}

/// Where the frames hold more than one periodic box, each frame's box is
/// read at run time (`BoxTime::Run`): one kernel (or CPU driver) for every
/// frame, and a note that says so; one box stays folded into the code.
fn one_kernel_for_boxes(problem: &Problem, frames: &mut [Frame]) -> Vec<String> {
    let mut boxes = Vec::new();
    for f in frames.iter() {
        if let Some((_, b)) = problem.periodic_box(&f.params)
            && !boxes.contains(&b)
        {
            boxes.push(b);
        }
    }
    if boxes.len() < 2 {
        return Vec::new();
    }
    let name = problem.periodic_box(&frames[0].params).map_or_else(|| "box".to_owned(), |(n, _)| n);
    for f in frames.iter_mut() {
        f.params = f.params.with_box_at_run_time();
    }
    vec![format!(
        "{} boxes over {} frames: the box ({name}) is read at run time, one compiled kernel (or CPU driver) for every frame",
        boxes.len(),
        frames.len()
    )]
}

/// Every frame's points moved into its periodic box (or refused), with a
/// note of how many moved per set; a box centred on the origin first takes
/// its points to the corner's convention (a shift by half of each box
/// vector, which leaves every minimum-image distance as it was).
fn into_box(problem: &Problem, frames: &mut [Frame], placement: Placement) -> Result<Vec<String>, RequestError> {
    let Some((name, first)) = problem.periodic_box(&frames[0].params) else {
        if placement.outside.is_some() || placement.origin == BoxOrigin::Center {
            let open = problem.params.iter().any(|p| p.kind == crate::spec::ParamKind::Box);
            return Err(refused!(
                "points outside a periodic box: problem `{}` has no periodic box{}",
                problem.name,
                if open { " (its box is open, 0)" } else { "" }
            ));
        }
        return Ok(Vec::new());
    };
    let mut moved = [0usize; 2];
    let count = frames.len();
    for frame in frames.iter_mut() {
        let (_, b) = problem.periodic_box(&frame.params).expect("the frames' boxes are all periodic or all open");
        let mut shapes = frame.shapes.take();
        for (k, set) in frame.inputs.sets_mut().enumerate() {
            let mut ranges = shapes.as_ref().map(|s| if k == 0 { &s.a } else { s.other() }.ranges.clone());
            if placement.origin == BoxOrigin::Center {
                set.shift(b.cartesian([0.5; 3]));
                ranges = None;
            }
            let n = set
                .into_box_ranged((&name, &b), placement.outside, ranges.as_deref())
                .map_err(RequestError::Outside)?;
            if n > 0 || placement.origin == BoxOrigin::Center {
                // Moved points are measured again, by the run.
                shapes = None;
            }
            moved[k] += n;
        }
        frame.shapes = shapes;
    }
    let within = if count > 1 && frames.iter().any(|f| f.params != frames[0].params) {
        "of each frame".to_owned()
    } else {
        format!("{name}={first}")
    };
    let over = if count > 1 { format!(" (over {count} frames)") } else { String::new() };
    let mut notes = Vec::new();
    for (k, moved) in moved.into_iter().enumerate().filter(|(_, m)| *m > 0) {
        let set = if k == 0 { &frames[0].inputs.a } else { frames[0].inputs.other() };
        notes.push(format!("{}: {moved} points outside the box {within} wrapped into it{over}", set.origin));
    }
    Ok(notes)
}

/// The weights and ids joined to every frame's sets, in the order the
/// problem reads them (the weight, then each id), each as long as its set.
fn join(problem: &Problem, frames: &mut [Frame], joined: Joined) -> Result<(), RequestError> {
    let sets = match problem.input.sets {
        Sets::One => 1,
        Sets::Two => 2,
    };
    let weighted = problem.input.point_weights;
    match (weighted, joined.weights.len()) {
        (false, 0) => {}
        (true, n) if n == sets => {}
        (true, 0) => return Err(refused!("problem `{}` takes a weight per point; none were given", problem.name)),
        (false, _) => {
            return Err(refused!("weights for problem `{}`, which is not weighted per point", problem.name));
        }
        (true, n) => {
            return Err(refused!(
                "{n} weight columns for {sets} set(s) of points: give one per set, in the same order"
            ));
        }
    }
    let mut ids: Vec<(String, &[Vec<Column>])> = Vec::new();
    for name in &problem.input.ids {
        let Some((_, frames_columns)) = joined.ids.iter().find(|(n, _)| n == name) else {
            return Err(refused!("problem `{}` takes an id `{name}` per point, which was not given", problem.name));
        };
        if frames_columns.len() != 1 && frames_columns.len() != frames.len() {
            return Err(refused!(
                "id `{name}`: columns for {} frames of {}: give one list for every frame, or one a frame",
                frames_columns.len(),
                frames.len()
            ));
        }
        if let Some(c) = frames_columns.iter().find(|c| c.len() != sets) {
            return Err(refused!(
                "id `{name}`: {} columns for {sets} set(s) of points: give one per set, in the same order",
                c.len()
            ));
        }
        ids.push((format!("id `{name}`"), frames_columns));
    }
    if !weighted && ids.is_empty() {
        return Ok(());
    }
    for (f, frame) in frames.iter_mut().enumerate() {
        // The shapes the caller measured lack the joined columns: the run measures again.
        frame.shapes = None;
        for (k, set) in frame.inputs.sets_mut().enumerate() {
            if weighted {
                push_column(set, &joined.weights[k], "weights")?;
            }
            for (what, frames_columns) in &ids {
                push_column(set, &frames_columns[f.min(frames_columns.len() - 1)][k], what)?;
            }
        }
    }
    Ok(())
}

/// `column` joined to `set`: as long as it, of the type the problem reads.
fn push_column(set: &mut PointSet, column: &Column, what: &str) -> Result<(), RequestError> {
    let rows = set.rows.clone();
    let column = match rows {
        // Rows were left out of the set (non-finite points dropped): the same rows of the column.
        Some(kept) if column.len() != set.len() => column.select(&kept.iter().map(|&r| r as usize).collect::<Vec<_>>()),
        _ => column.clone(),
    };
    if column.len() != set.len() {
        return Err(refused!("{} {what} for {} ({} points)", column.len(), set.origin, set.len()));
    }
    set.columns.push(column);
    Ok(())
}
