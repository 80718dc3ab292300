//! What a run shows and writes: result files people can open, a summary on
//! stdout, and a JSON report of everything.

use serde_json::json;

use std::path::Path;

use crate::data::{Column, Inputs};
use crate::index::IndexKind;
use crate::outcome::{Outcome, PairList, Totals};
use crate::plot::{self, Figure, PlotError, Series};
use crate::request::Frame;
use crate::run::Execution;
use crate::spec::{Normalization, Output, Params, Problem, Sets, Spacing};
use crate::stage::contribution;
use crate::stage::visit::Visit;
use crate::write::{self, Destination, Format, Target, WriteError};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("both orders of every pair (--symmetric) apply to pairs of a one-set problem with a symmetric function")]
    NotSymmetric,
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    Plot(#[from] PlotError),
    #[error("--plot draws histograms and g(r); problem `{0}` makes {1}")]
    NothingToPlot(String, &'static str),
}

/// Refuses --plot, before the run, for an output that is not a histogram.
pub fn check_plot(problem: &Problem, path: &Path) -> Result<(), ReportError> {
    if !matches!(problem.output, Output::Histogram { .. }) {
        return Err(ReportError::NothingToPlot(problem.name.clone(), problem.output.kind()));
    }
    plot::check(path)?;
    Ok(())
}

/// Draws the run's histogram, or g(r) where the problem normalizes so, to `path`.
pub fn plot(problem: &Problem, frames: &[Frame], exec: &Execution, path: &Path) -> Result<(), ReportError> {
    let params = &frames[0].params;
    let Outcome::Totals(totals) = &exec.outcome else {
        return Err(ReportError::NothingToPlot(problem.name.clone(), problem.output.kind()));
    };
    let Output::Histogram { spacing, weight, .. } = &problem.output else {
        return Err(ReportError::NothingToPlot(problem.name.clone(), problem.output.kind()));
    };
    let edges = contribution::histogram_edges(problem, params);
    let values = totals.as_f64();
    let points: usize = frames[0].inputs.a.len() + frames[0].inputs.b.as_ref().map_or(0, |b| b.len());
    let mut what = format!("{} points", points);
    if frames.len() > 1 {
        what += &format!(", {} frames", frames.len());
    }
    let (values, title, y_label) = match problem.normalize {
        Some(Normalization::Rdf) => {
            let (g, _) = g_of_r(problem, frames, &edges, &values);
            (g, format!("{}: g(r), {what}", problem.name), "g(r)".to_owned())
        }
        None => {
            let y = match weight {
                Some(w) => format!("sum of {w}(a, b)"),
                None => "pairs".to_owned(),
            };
            (values, format!("{}: {}, {what}", problem.name, problem.summary.split(':').next().unwrap_or("")), y)
        }
    };
    let x_label = match problem.normalize {
        Some(Normalization::Rdf) => "r".to_owned(),
        None => format!("{}(a, b)", problem.function.name),
    };
    let figure = Figure {
        title,
        x_label,
        y_label,
        log_x: *spacing == Spacing::Log,
        series: vec![Series { label: problem.name.clone(), edges: &edges, values: &values }],
    };
    plot::draw(&figure, path)?;
    Ok(())
}

#[derive(Debug, Clone, Default)]
pub struct OutputOptions {
    /// Where the result goes, and in which format ([`default_target`] when the user names none).
    pub out: Option<Target>,
    /// Pairs of a one-set problem in both orders plus (i, i), as GDS-Join counts them.
    pub symmetric: bool,
    /// Pairs sorted by (i, j).
    pub sorted: bool,
    /// Stdout carries the result alone (a count, a sum, a histogram's CSV); no other line.
    pub quiet: bool,
}

/// Where a result goes when the user names no place: a histogram's CSV to
/// stdout, pairs to `<problem>_pairs.npy`, neighbours to `<problem>.npy`; a
/// count or a sum is printed.
pub fn default_target(problem: &Problem) -> Result<Option<Target>, WriteError> {
    Ok(match &problem.output {
        Output::Histogram { .. } | Output::Histogram2d { .. } => {
            Some(Target::new(Destination::Stdout, Some(Format::Csv))?)
        }
        Output::Pairs { .. } => Some(Target::file(format!("{}_pairs.npy", problem.name))?),
        Output::Knn { .. } => Some(Target::file(format!("{}.npy", problem.name))?),
        Output::Count { .. } | Output::Sum => None,
    })
}

/// The pair conventions, stated in the report and the docs.
fn conventions(problem: &Problem, visit: Visit, symmetric: bool) -> String {
    let pairs = match (visit, &problem.output) {
        (Visit::LowerTriangle, Output::Pairs { .. }) if symmetric => {
            "pairs in both orders, plus (i, i) for every point (--symmetric; right for a distance, which is 0 at i = i)"
        }
        (Visit::LowerTriangle, _) => "each unordered pair once, as (i, j) with i < j; no self-pairs",
        (Visit::AllPairs, Output::Knn { .. }) => {
            "every other point is a candidate: a point is never its own neighbour; ties go to the smaller index"
        }
        (Visit::AllPairs, _) => "every ordered pair (i, j) with i != j",
        (Visit::Cross, _) => "every (a, b) with a from set A and b from set B",
    };
    let test = match &problem.output {
        Output::Count { compare, .. } | Output::Pairs { compare, .. } => {
            format!("; a pair passes when f(a, b) {} threshold", compare.c_operator())
        }
        Output::Histogram { .. } => {
            "; bucket k holds min + k w <= f(a, b) < min + (k + 1) w, values outside are not counted".to_owned()
        }
        Output::Histogram2d { axes, .. } => format!(
            "; cell (i, j) holds the pairs whose {} is in bucket i and {} in bucket j, each axis's buckets as a histogram's; a pair outside either axis is not counted",
            axes[0].name, axes[1].name
        ),
        _ => String::new(),
    };
    format!("{pairs}{test}; indices are row numbers of the input files, from 0")
}

/// g(r) of each shell, from the counts of all frames, and how it was
/// normalised: each frame's pair density (its pairs over its volume: the
/// periodic box's, else the bounding box of its data) adds to the ideal-gas
/// count of every shell, as MDAnalysis's InterRDF averages over frames.
pub fn g_of_r(problem: &Problem, frames: &[Frame], edges: &[f64], counts: &[f64]) -> (Vec<f64>, String) {
    let densities: Vec<(f64, String)> = frames.iter().map(|f| pair_density(problem, &f.params, &f.inputs)).collect();
    let pair_density: f64 = densities.iter().map(|(d, _)| d).sum();
    let g = counts
        .iter()
        .enumerate()
        .map(|(k, &c)| {
            let shell = 4.0 / 3.0 * std::f64::consts::PI * (edges[k + 1].powi(3) - edges[k].powi(3));
            c / (pair_density * shell)
        })
        .collect();
    let how = match frames.len() {
        1 => densities[0].1.clone(),
        n if densities.iter().all(|d| d.1 == densities[0].1) => format!("{}; summed over {n} frames", densities[0].1),
        n => format!("each frame's own (frame 0: {}); summed over {n} frames", densities[0].1),
    };
    (g, format!("g(r) = count / (pair density x shell volume), volume from {how}"))
}

/// The pairs of one frame per unit volume, and where the volume came from.
/// Excluded pairs (`<exclude>`) are not pairs the frame could have, as
/// MDAnalysis's InterRDF takes its `exclusion_block`'s out of its density.
fn pair_density(problem: &Problem, params: &Params, inputs: &Inputs) -> (f64, String) {
    let (volume, mut how) = volume(problem, params, inputs);
    let n_a = inputs.a.len() as f64;
    let mut pairs = match problem.input.sets {
        Sets::Two => n_a * inputs.other().len() as f64,
        Sets::One => n_a * (n_a - 1.0) / 2.0,
    };
    if let Some(id) = &problem.exclude {
        let excluded = excluded_pairs(problem, id, inputs);
        pairs -= excluded as f64;
        how += &format!(", less the {excluded} pairs of the same {id}");
    }
    (pairs / volume, how)
}

/// The pairs whose points share their id `id`: within one set, c (c - 1) / 2
/// for each id held by c points; between two, c_A c_B.
pub fn excluded_pairs(problem: &Problem, id: &str, inputs: &Inputs) -> u64 {
    let column = |set: &crate::data::PointSet| -> std::collections::HashMap<i32, u64> {
        let k = problem.input.components().iter().position(|c| c.name == id).expect("the id is a component");
        let crate::data::Column::I32(v) = &set.columns[k] else { unreachable!("ids are i32") };
        let mut counts = std::collections::HashMap::new();
        for &x in v {
            *counts.entry(x).or_insert(0u64) += 1;
        }
        counts
    };
    let a = column(&inputs.a);
    match (&problem.input.sets, &inputs.b) {
        (Sets::Two, Some(b)) => {
            let b = column(b);
            a.iter().map(|(x, ca)| ca * b.get(x).copied().unwrap_or(0)).sum()
        }
        _ => a.values().map(|c| c * (c - 1) / 2).sum(),
    }
}

/// The volume g(r) takes one frame's pair density over: the periodic box's,
/// else the bounding box of its points; and where it came from.
pub fn volume(problem: &Problem, params: &Params, inputs: &Inputs) -> (f64, String) {
    match box_volume(problem, params) {
        Some(from_box) => from_box,
        None => {
            let mut bounds = inputs.a.bounds();
            if let Some(b) = &inputs.b {
                for (x, y) in bounds.iter_mut().zip(b.bounds()) {
                    *x = (x.0.min(y.0), x.1.max(y.1));
                }
            }
            let v: f64 = bounds.iter().map(|(lo, hi)| hi - lo).product();
            (v, format!("the bounding box of the data, {}", crate::data::extent(&bounds)))
        }
    }
}

/// [`volume`] where the problem has a periodic box (the points not needed).
pub fn box_volume(problem: &Problem, params: &Params) -> Option<(f64, String)> {
    let (name, b) = problem.periodic_box(params)?;
    Some((b.volume(), format!("the periodic box {name}={b}, volume {}", b.volume())))
}

/// Where the lines that describe a run go, given what stdout carries.
struct Lines {
    quiet: bool,
    /// Stdout carries data: the result or the JSON report.
    stdout_has_data: bool,
    /// With --quiet and no other place for it, a count or sum is the one line on stdout.
    result_alone: bool,
}

impl Lines {
    fn new(opts: &OutputOptions, report_to_stdout: bool) -> Lines {
        let to_stdout = opts.out.as_ref().is_some_and(|t| t.destination == Destination::Stdout);
        Lines {
            quiet: opts.quiet,
            stdout_has_data: report_to_stdout || to_stdout,
            result_alone: opts.quiet && !report_to_stdout && opts.out.is_none(),
        }
    }

    /// A human-readable line: to stderr when stdout carries data, nowhere with --quiet.
    fn say(&self, line: String) {
        match (self.quiet, self.stdout_has_data) {
            (true, _) => {}
            (false, true) => eprintln!("{line}"),
            (false, false) => println!("{line}"),
        }
    }

    /// A count or sum, printed alone where --quiet leaves it no other place.
    fn result(&self, line: String) {
        if self.result_alone {
            println!("{line}")
        }
    }
}

/// Records in the report's result where it was written, and in which format.
fn wrote(target: &Target, result: &mut serde_json::Map<String, serde_json::Value>) {
    if let Destination::File(path) = &target.destination {
        result.insert("file".into(), json!(path.display().to_string()));
    }
    result.insert("format".into(), json!(target.format.name()));
}

/// Writes the result, prints a summary, and returns the JSON report.
pub fn present(
    problem: &Problem,
    frames: &[Frame],
    exec: &Execution,
    opts: &OutputOptions,
    report_to_stdout: bool,
) -> Result<serde_json::Value, ReportError> {
    let params = &frames[0].params;
    // Pairs and KNN lists come from one frame (a request of several is one of totals).
    let inputs = &frames[0].inputs;
    let lines = Lines::new(opts, report_to_stdout);
    let mut result = serde_json::Map::new();
    result.insert("kind".into(), json!(problem.output.kind()));
    lines.say(format!("{}: {}", problem.name, contribution::describe(problem, params)));
    match (&exec.outcome, &problem.output) {
        (Outcome::Totals(total @ Totals::Counts(c)), Output::Count { .. }) => {
            present_scalar("count", c[0], total, opts.out.as_ref(), &lines, &mut result)?
        }
        (Outcome::Totals(total @ Totals::Sums(s)), Output::Sum) => {
            present_scalar("sum", s[0], total, opts.out.as_ref(), &lines, &mut result)?
        }
        (Outcome::Totals(totals), _) => {
            // The report on stdout holds the histogram; stdout takes nothing else.
            let target = opts.out.as_ref().filter(|t| !(report_to_stdout && t.destination == Destination::Stdout));
            present_histogram(problem, frames, totals, target, &lines, &mut result)?
        }
        (Outcome::Pairs(pairs), _) => {
            present_pairs(problem, inputs, exec.shape.visit, pairs, opts, &lines, &mut result)?
        }
        (Outcome::Knn { k, ids, values }, _) => {
            let target = opts.out.as_ref().expect("neighbours always have a target");
            present_knn(inputs, *k, ids, values, target, &lines, &mut result)?
        }
        (Outcome::KnnOnGpu(_), _) => {
            unreachable!("the command line's points lie on the host, and so do the lists it reports")
        }
    }
    say_timings(exec, &lines);
    say_gpus(exec, &lines);
    say_ranks(exec, &lines);
    if let Some(v) = &exec.verified {
        lines.say(format!("verified: {v}"));
    }
    if frames.len() > 1 {
        lines.say(format!("{} frames, totals summed over them", frames.len()));
        result.insert("frames".into(), json!(frames.len()));
    }
    Ok(report(problem, params, inputs, exec, opts.symmetric, result))
}

/// A count or a sum: printed, and written where the user named a place.
fn present_scalar<T: std::fmt::Display + serde::Serialize>(
    name: &str,
    value: T,
    totals: &Totals,
    target: Option<&Target>,
    lines: &Lines,
    result: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<(), ReportError> {
    lines.say(format!("{name} = {value}"));
    lines.result(value.to_string());
    result.insert(name.into(), json!(value));
    if let Some(target) = target {
        write::scalar(target, name, totals)?;
        wrote(target, result);
    }
    Ok(())
}

/// A histogram, with g(r) where the problem normalizes so: written to
/// `target` where there is one, and always whole in the report.
fn present_histogram(
    problem: &Problem,
    frames: &[Frame],
    totals: &Totals,
    target: Option<&Target>,
    lines: &Lines,
    result: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<(), ReportError> {
    if let Output::Histogram2d { .. } = &problem.output {
        return present_histogram2d(problem, &frames[0].params, totals, target, lines, result);
    }
    let edges = contribution::histogram_edges(problem, &frames[0].params);
    let g = (problem.normalize == Some(Normalization::Rdf)).then(|| g_of_r(problem, frames, &edges, &totals.as_f64()));
    let what = match totals {
        Totals::Counts(c) => format!("{} pairs counted", c.iter().sum::<u64>()),
        Totals::Sums(s) => format!("pair weights summing to {}", s.iter().sum::<f64>()),
    };
    let h = write::Histogram { edges: &edges, totals, g: g.as_ref().map(|(g, _)| g.as_slice()) };
    match target {
        Some(target) => {
            write::histogram(target, &h)?;
            lines.say(format!("{} buckets, {what} -> {}", totals.len(), target.shown()));
            wrote(target, result);
        }
        None => lines.say(format!("{what} in {} buckets", totals.len())),
    }
    if let Some((g, how)) = &g {
        lines.say(how.clone());
        result.insert("g_r".into(), json!(g));
        result.insert("normalization".into(), json!(how));
    }
    result.insert("edges".into(), json!(edges));
    match totals {
        Totals::Counts(c) => result.insert("counts".into(), json!(c)),
        Totals::Sums(s) => result.insert("sums".into(), json!(s)),
    };
    Ok(())
}

/// A 2-D histogram: one row per cell, the first axis's bucket outer (as the
/// slots lie), its edges and the second axis's, then the count or sum
/// (`rp_lo,rp_hi,pi_lo,pi_hi,count`); always whole in the report.
fn present_histogram2d(
    problem: &Problem,
    params: &Params,
    totals: &Totals,
    target: Option<&Target>,
    lines: &Lines,
    result: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<(), ReportError> {
    let axes = contribution::histogram2d_axes(problem, params);
    let what = match totals {
        Totals::Counts(c) => format!("{} pairs counted", c.iter().sum::<u64>()),
        Totals::Sums(s) => format!("pair weights summing to {}", s.iter().sum::<f64>()),
    };
    let cells = format!("{} x {} cells", axes[0].1.len() - 1, axes[1].1.len() - 1);
    match target {
        Some(target) => {
            write::histogram2d(target, &axes, totals)?;
            lines.say(format!("{cells}, {what} -> {}", target.shown()));
            wrote(target, result);
        }
        None => lines.say(format!("{what} in {cells}")),
    }
    result.insert(
        "axes".into(),
        json!(axes.iter().map(|(name, edges)| json!({ "name": name, "edges": edges })).collect::<Vec<_>>()),
    );
    match totals {
        Totals::Counts(c) => result.insert("counts".into(), json!(c)),
        Totals::Sums(s) => result.insert("sums".into(), json!(s)),
    };
    Ok(())
}

/// The pairs, written as found where nothing asks to change them, else as
/// rows of the input files, mirrored and sorted as asked.
fn present_pairs(
    problem: &Problem,
    inputs: &Inputs,
    visit: Visit,
    pairs: &PairList,
    opts: &OutputOptions,
    lines: &Lines,
    result: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<(), ReportError> {
    let target = opts.out.as_ref().expect("pairs always have a target");
    // Points that are their input rows, neither mirrored nor sorted, go out as they lie.
    let as_found = !opts.symmetric && !opts.sorted && inputs.a.rows.is_none() && inputs.other().rows.is_none();
    let count = match as_found.then(|| write::pairs_as_found(target, pairs)).flatten() {
        Some(written) => {
            written?;
            pairs.len()
        }
        None => {
            let rows = pair_rows(problem, inputs, visit, pairs, opts)?;
            write::pairs(target, &rows)?;
            rows.len()
        }
    };
    lines.say(format!("{count} pairs -> {}", target.shown()));
    result.insert("pairs".into(), json!(count));
    result.insert("sorted".into(), json!(opts.sorted));
    wrote(target, result);
    Ok(())
}

/// The pairs as rows of the input files: with --symmetric both orders and
/// (i, i) for every point, with --sorted in (i, j) order.
fn pair_rows(
    problem: &Problem,
    inputs: &Inputs,
    visit: Visit,
    pairs: &PairList,
    opts: &OutputOptions,
) -> Result<Vec<[u64; 2]>, ReportError> {
    let one_set = problem.input.sets == Sets::One;
    let other = inputs.other();
    let mut rows: Vec<[u64; 2]> =
        pairs.iter().map(|&[i, j]| [inputs.a.original_row(i as u64), other.original_row(j as u64)]).collect();
    if opts.symmetric {
        if !(one_set && visit == Visit::LowerTriangle) {
            return Err(ReportError::NotSymmetric);
        }
        let n = rows.len();
        rows.reserve(n + inputs.a.len());
        for k in 0..n {
            rows.push([rows[k][1], rows[k][0]]);
        }
        rows.extend((0..inputs.a.len() as u64).map(|i| [inputs.a.original_row(i); 2]));
    }
    if opts.sorted {
        rows.sort_unstable();
    }
    Ok(rows)
}

/// Each query's K nearest neighbours, as rows of the other set (-1 where a
/// query has fewer than K partners), and their values where written apart.
fn present_knn(
    inputs: &Inputs,
    k: usize,
    ids: &[u32],
    values: &Column,
    target: &Target,
    lines: &Lines,
    result: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<(), ReportError> {
    let other = inputs.other();
    let rows: Vec<i64> =
        ids.iter().map(|&j| if j == u32::MAX { -1 } else { other.original_row(j as u64) as i64 }).collect();
    let values_path = write::knn(target, k, &rows, values)?;
    lines.say(format!(
        "{k} neighbours of {} points -> {}{}",
        ids.len() / k.max(1),
        target.shown(),
        values_path.as_ref().map_or(String::new(), |p| format!(" (values: {})", p.display()))
    ));
    result.insert("k".into(), json!(k));
    wrote(target, result);
    if let Some(p) = values_path {
        result.insert("values_file".into(), json!(p.display().to_string()));
    }
    Ok(())
}

/// The backend, its timings, and the index it used.
fn say_timings(exec: &Execution, lines: &Lines) {
    let t = &exec.timings;
    lines.say(format!(
        "{} on {}: {} pairs in {:.3} s ({:.3e} pairs/s; compile {:.3} s)",
        exec.backend.name(),
        exec.device,
        exec.index.pairs,
        t.compute_s,
        t.pairs_per_s,
        t.compile_s
    ));
    lines.say(format!(
        "  index {}: {}{}",
        exec.index.name(),
        exec.index.why,
        t.index_s.map_or(String::new(), |s| format!(" (made in {s:.4} s)"))
    ));
    if let Some(g) = &t.gpu {
        lines.say(format!(
            "  CUDA driver and contexts {:.4} s (apart); buffers {:.4} s, upload {:.4} s, kernels {:.4} s, download {:.4} s, host combine {:.4} s, freeing {:.4} s; {} launches ({} after the output buffer filled){}",
            g.context_s,
            g.setup_s,
            g.upload_s,
            g.kernel_s,
            g.download_s,
            g.combine_s,
            g.teardown_s,
            g.launches,
            g.overflow_relaunches,
            match (t.fp_instructions_per_pair, t.fp32_issue_fraction) {
                (Some(i), Some(f)) =>
                    format!("; {i} FP instructions per pair: {:.1}% of the FP32 issue rate", 100.0 * f),
                _ => String::new(),
            }
        ));
    }
}

/// How a GPU run shared its work: the GPUs it used, the CPU beside them
/// (on an index), and each GPU's part where there were several.
fn say_gpus(exec: &Execution, lines: &Lines) {
    let t = &exec.timings;
    if let Some((_, gpus)) = exec.schedule.iter().find(|(k, _)| *k == "gpus").filter(|_| t.gpu.is_some()) {
        lines.say(format!("  GPUs: {gpus}"));
    }
    if let Some(g) = t.gpu.as_ref().filter(|_| exec.index.index != IndexKind::None) {
        let h = &g.hybrid;
        lines.say(format!(
            "  CPU beside the GPUs: {}{}",
            h.why,
            if h.cpu {
                format!(
                    "; it took {} units, {:.2}% of the pairs, busy {:.4} s",
                    h.cpu_units,
                    100.0 * h.cpu_share,
                    h.cpu_busy_s
                )
            } else {
                String::new()
            }
        ));
    }
    if let Some(g) = t.gpu.as_ref().filter(|g| g.per_gpu.len() > 1) {
        for w in &g.per_gpu {
            lines.say(format!(
                "  GPU {}: {} of {} pieces, {:.1}% of the pairs, busy {:.3} s (kernels {:.3} s), idle {:.3} s",
                w.ordinal,
                w.pieces,
                g.pieces,
                100.0 * w.share,
                w.busy_s,
                w.kernel_s,
                w.idle_s
            ));
        }
    }
}

/// What each MPI rank took of the run, where several shared it.
fn say_ranks(exec: &Execution, lines: &Lines) {
    if exec.ranks.is_empty() {
        return;
    }
    let pairs: u128 = exec.ranks.iter().map(|r| r.pairs).sum();
    let slowest = exec.ranks.iter().map(|r| r.compute_s).fold(0.0, f64::max);
    lines.say(format!("  MPI: {} ranks shared the work; the slowest computed for {slowest:.3} s", exec.ranks.len()));
    for r in &exec.ranks {
        let on = if r.gpus > 0 { format!("{} GPU(s)", r.gpus) } else { format!("{} CPU threads", r.threads) };
        lines.say(format!(
            "  rank {} on {} ({on}): {} pieces of the shared list, {:.1}% of the pairs, {:.3} s, {} of input held at most ({}), {} received",
            r.rank,
            r.host,
            r.taken,
            100.0 * r.pairs as f64 / pairs.max(1) as f64,
            r.compute_s,
            crate::memory::bytes(r.input_bytes),
            r.holding.name(),
            crate::memory::bytes(r.received_bytes)
        ));
    }
}

/// The JSON report: the problem, the inputs, the run, and the result.
fn report(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    exec: &Execution,
    symmetric: bool,
    result: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Value {
    let mut inputs_json = vec![json!(inputs.a.summary())];
    if let Some(b) = &inputs.b {
        inputs_json.push(json!(b.summary()));
    }
    let mut report = json!({
        "problem": { "name": problem.name, "origin": problem.origin, "summary": problem.summary },
        "params": params.values.iter().map(|(n, v)| (n.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "inputs": inputs_json,
        "conventions": conventions(problem, exec.shape.visit, symmetric),
        "result": result,
    });
    if let (Some(report), serde_json::Value::Object(run)) = (report.as_object_mut(), execution(exec)) {
        report.extend(run);
    }
    report
}

/// How one run went, as every report tells it: where it ran, the index and
/// why, the schedule, the timings and the kernels' plans.
pub fn execution(exec: &Execution) -> serde_json::Value {
    json!({
        "backend": exec.backend.name(),
        "device": exec.device,
        "notes": exec.notes,
        "pairs": u64::try_from(exec.shape.pairs).map_or_else(|_| json!(exec.shape.pairs.to_string()), |p| json!(p)),
        "index": exec.index,
        "schedule": exec.schedule.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "timings": exec.timings,
        "plans": exec.plans,
        "verified": exec.verified,
        "ranks": exec.ranks,
        "box_time": exec.box_time,
    })
}
