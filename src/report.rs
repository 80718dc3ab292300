//! What a run shows and writes: result files people can open, a summary on
//! stdout, and a JSON report of everything.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::codegen;
use crate::data::{Inputs, write};
use crate::outcome::Outcome;
use crate::plan::{Visit, visit_of};
use crate::run::Execution;
use crate::spec::{Normalization, Output, Params, Problem, Sets};

#[derive(Debug, Clone, Default)]
pub struct OutputOptions {
    /// Where the result goes (CSV for a histogram, .npy or .csv for pairs, .npy for KNN).
    pub out: Option<PathBuf>,
    /// Pairs of a one-set problem in both orders plus (i, i), as GDS-Join counts them.
    pub symmetric: bool,
    /// Pairs sorted by (i, j).
    pub sorted: bool,
}

/// The pair conventions, stated in the report and the docs.
fn conventions(problem: &Problem, symmetric: bool) -> String {
    let pairs = match (visit_of(problem), &problem.output) {
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
        _ => String::new(),
    };
    format!("{pairs}{test}; indices are row numbers of the input files, from 0")
}

fn histogram_edges(problem: &Problem, params: &Params) -> Vec<f64> {
    let Output::Histogram { bins, min, max } = &problem.output else { return vec![] };
    let (bins, lo, hi) = (params.eval(bins).as_f64() as usize, params.eval(min).as_f64(), params.eval(max).as_f64());
    (0..=bins).map(|k| lo + (hi - lo) * k as f64 / bins as f64).collect()
}

/// g(r) of each shell and the volume it assumed: the `box` parameter's cube when
/// it is positive, else the bounding box of the data.
fn rdf(problem: &Problem, params: &Params, inputs: &Inputs, edges: &[f64], counts: &[u64]) -> (Vec<f64>, String) {
    let (volume, how) = match params.get("box").map(|v| v.as_f64()).filter(|b| *b > 0.0) {
        Some(b) => (b * b * b, format!("the periodic box of edge box = {b}")),
        None => {
            let mut bounds = inputs.a.bounds();
            if let Some(b) = &inputs.b {
                for (x, y) in bounds.iter_mut().zip(b.bounds()) {
                    *x = (x.0.min(y.0), x.1.max(y.1));
                }
            }
            let v: f64 = bounds.iter().map(|(lo, hi)| hi - lo).product();
            (
                v,
                format!(
                    "the bounding box of the data, {}",
                    bounds.iter().map(|(lo, hi)| format!("[{lo}, {hi}]")).collect::<Vec<_>>().join(" x ")
                ),
            )
        }
    };
    let n_a = inputs.a.len() as f64;
    // Pairs an ideal gas of the same density puts at each distance.
    let pair_density = match problem.input.sets {
        Sets::Two => n_a * inputs.other().len() as f64 / volume,
        Sets::One => n_a * (n_a - 1.0) / 2.0 / volume,
    };
    let g = counts
        .iter()
        .enumerate()
        .map(|(k, &c)| {
            let shell = 4.0 / 3.0 * std::f64::consts::PI * (edges[k + 1].powi(3) - edges[k].powi(3));
            c as f64 / (pair_density * shell)
        })
        .collect();
    (g, format!("g(r) = count / (pair density x shell volume), volume from {how}"))
}

/// Writes the result, prints a summary, and returns the JSON report.
pub fn present(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    exec: &Execution,
    opts: &OutputOptions,
    report_to_stdout: bool,
) -> anyhow::Result<serde_json::Value> {
    let mut result = serde_json::Map::new();
    result.insert("kind".into(), json!(exec.outcome.kind()));
    // Human-readable lines go to stderr when stdout carries data: the JSON
    // report, or a histogram's CSV (so that `twobs run rdf > g.csv` is a clean CSV).
    let csv_to_stdout = matches!(exec.outcome, Outcome::Histogram(_)) && opts.out.is_none() && !report_to_stdout;
    let quiet_stdout = report_to_stdout || csv_to_stdout;
    let say = |line: String| if quiet_stdout { eprintln!("{line}") } else { println!("{line}") };
    say(format!("{}: {}", problem.name, codegen::output_text(problem, params)));
    match &exec.outcome {
        Outcome::Count(c) => {
            say(format!("count = {c}"));
            result.insert("count".into(), json!(c));
        }
        Outcome::Sum(s) => {
            say(format!("sum = {s}"));
            result.insert("sum".into(), json!(s));
        }
        Outcome::Histogram(counts) => {
            let edges = histogram_edges(problem, params);
            let g =
                (problem.normalize == Some(Normalization::Rdf)).then(|| rdf(problem, params, inputs, &edges, counts));
            match &opts.out {
                Some(path) => {
                    write::histogram_csv(path, &edges, counts, g.as_ref().map(|(g, _)| g.as_slice()))?;
                    say(format!(
                        "{} buckets, {} pairs counted -> {}",
                        counts.len(),
                        counts.iter().sum::<u64>(),
                        path.display()
                    ));
                    result.insert("file".into(), json!(path.display().to_string()));
                }
                None => {
                    let g = g.as_ref().map(|(g, _)| g.as_slice());
                    if report_to_stdout {
                        write::histogram_csv_to(&mut std::io::stderr().lock(), &edges, counts, g)?;
                    } else {
                        write::histogram_csv_to(&mut std::io::stdout().lock(), &edges, counts, g)?;
                    }
                    say(format!("{} pairs counted in {} buckets", counts.iter().sum::<u64>(), counts.len()));
                }
            }
            if let Some((g, how)) = &g {
                say(how.clone());
                result.insert("g_r".into(), json!(g));
                result.insert("normalization".into(), json!(how));
            }
            result.insert("edges".into(), json!(edges));
            result.insert("counts".into(), json!(counts));
        }
        Outcome::Pairs(pairs) => {
            let one_set = problem.input.sets == Sets::One;
            let other = inputs.other();
            let mut rows: Vec<[u64; 2]> =
                pairs.iter().map(|&[i, j]| [inputs.a.original_row(i as u64), other.original_row(j as u64)]).collect();
            if opts.symmetric {
                if !(one_set && visit_of(problem) == Visit::LowerTriangle) {
                    anyhow::bail!("--symmetric applies to pairs of a one-set problem with a symmetric function");
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
            let path = opts.out.clone().unwrap_or_else(|| PathBuf::from(format!("{}_pairs.npy", problem.name)));
            write::pairs(&path, &rows)?;
            say(format!("{} pairs -> {}", rows.len(), path.display()));
            result.insert("pairs".into(), json!(rows.len()));
            result.insert("file".into(), json!(path.display().to_string()));
            result.insert("sorted".into(), json!(opts.sorted));
        }
        Outcome::Knn { k, ids, values } => {
            let other = inputs.other();
            let rows: Vec<u64> = ids
                .iter()
                .map(|&j| if j == u32::MAX { u32::MAX as u64 } else { other.original_row(j as u64) })
                .collect();
            let path = opts.out.clone().unwrap_or_else(|| PathBuf::from(format!("{}.npy", problem.name)));
            let values_path = write::knn(&path, *k, &rows, values)?;
            say(format!(
                "{k} neighbours of {} points -> {} (indices), {} (values)",
                ids.len() / k.max(&1),
                path.display(),
                values_path.display()
            ));
            result.insert("k".into(), json!(k));
            result.insert("file".into(), json!(path.display().to_string()));
            result.insert("values_file".into(), json!(values_path.display().to_string()));
        }
    }
    let t = &exec.timings;
    say(format!(
        "{} on {}: {} pairs in {:.3} s ({:.3e} pairs/s; compile {:.3} s)",
        exec.backend, exec.device, exec.pairs, t.compute_s, t.pairs_per_s, t.compile_s
    ));
    if let Some(g) = &t.gpu {
        say(format!(
            "  upload {:.4} s, kernels {:.4} s, download {:.4} s, host combine {:.4} s; {} launches ({} after the output buffer filled){}",
            g.upload_s,
            g.kernel_s,
            g.download_s,
            g.combine_s,
            g.launches,
            g.overflow_relaunches,
            match (t.fp_instructions_per_pair, t.fp32_issue_fraction) {
                (Some(i), Some(f)) =>
                    format!("; {i} FP instructions per pair: {:.1}% of the FP32 issue rate", 100.0 * f),
                _ => String::new(),
            }
        ));
    }
    if let Some(v) = &exec.verified {
        say(format!("verified: {v}"));
    }
    let mut inputs_json = vec![json!(inputs.a.summary())];
    if let Some(b) = &inputs.b {
        inputs_json.push(json!(b.summary()));
    }
    Ok(json!({
        "problem": { "name": problem.name, "origin": problem.origin, "summary": problem.summary },
        "params": params.values.iter().map(|(n, v)| (n.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "backend": exec.backend,
        "device": exec.device,
        "notes": exec.notes,
        "inputs": inputs_json,
        "pairs": exec.pairs.to_string(),
        "conventions": conventions(problem, opts.symmetric),
        "result": result,
        "timings": t,
        "plans": exec.plans,
        "verified": exec.verified,
    }))
}

/// Writes the report to `dest` (`-` for stdout).
pub fn write_report(report: &serde_json::Value, dest: &str) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(report)? + "\n";
    if dest == "-" {
        print!("{text}");
    } else {
        std::fs::write(Path::new(dest), text).map_err(|e| anyhow::anyhow!("cannot write the report {dest}: {e}"))?;
    }
    Ok(())
}
