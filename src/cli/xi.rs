//! `twobs xi`: the two-point correlation function of a catalogue against randoms.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use super::{BackendArg, FormatArg, bind, load, with_input_dims};
use crate::cache::Cache;
use crate::data::{self, InputOptions, Inputs, read_input};
use crate::plot;
use crate::report;
use crate::request::Options;
use crate::run::{Progress, Workers};
use crate::schedule::GpuOptions;
use crate::stage::contribution;
use crate::write::{Destination, Named, Target as ResultTarget};
use crate::xi::{self, Estimator, LineOfSight, Norm};

#[derive(Args)]
pub(super) struct XiArgs {
    /// The catalogue: a .npy, .csv/.txt or .bin/.raw file of 3-D positions, or uniform:N ...
    #[arg(long, value_name = "FILE|GEN:N")]
    data: String,
    /// Randoms: positions drawn uniformly over the catalogue's volume and mask.
    #[arg(long, value_name = "FILE|GEN:N", required_unless_present = "box_size", conflicts_with = "box_size")]
    randoms: Option<String>,
    /// A periodic box (L, or Lx,Ly,Lz) holding the data, instead of randoms:
    /// DD with minimum images, RR analytic from the shells' volumes (Corrfunc's theory.xi).
    #[arg(long = "box", value_name = "L|LX,LY,LZ")]
    box_size: Option<String>,
    /// A weight per data point (1-D .npy or one number per line): pair counts
    /// become sums of weight products, normalised by the weight totals.
    #[arg(long, value_name = "FILE")]
    data_weights: Option<String>,
    /// A weight per random point (each 1 when only --data-weights is given).
    #[arg(long, value_name = "FILE")]
    random_weights: Option<String>,
    /// The catalogues are RA and Dec in degrees (two columns) and xi is w(theta):
    /// angular separations in degrees (the built-in ddtheta; its parameters
    /// bins, theta_min, theta_max), as Corrfunc's DDtheta_mocks counts them.
    #[arg(long, conflicts_with_all = ["box_size", "rp_pi", "s_mu"])]
    radec: bool,
    /// xi(rp, pi) in cells of rp (across the line of sight, the z axis) and
    /// pi = |dz| in [0, PIMAX), and wp(rp) = 2 sum over pi of xi dpi (--wp):
    /// the built-in ddrppi (rp_bins, rp_min, rp_max; pi_bins, PIMAX of them
    /// by default, each 1 wide, as Corrfunc's DDrppi), Corrfunc's
    /// convert_rp_pi_counts_to_wp with randoms, its theory.wp with --box.
    #[arg(long, value_name = "PIMAX", conflicts_with = "s_mu")]
    rp_pi: Option<f32>,
    /// xi(s, mu) in cells of s and mu = |dz| / s in [0, 1), MU_BINS of them
    /// (the built-in ddsmu: s_bins, s_min, s_max, mu_max), as Corrfunc's DDsmu.
    #[arg(long, value_name = "MU_BINS")]
    s_mu: Option<u32>,
    /// Where wp(rp) goes with --rp-pi (.csv, .npy or .json, or - for
    /// standard output): rp_lo, rp_hi, wp.
    #[arg(long, value_name = "FILE|-", requires = "rp_pi")]
    wp: Option<String>,
    /// Where the multipoles of xi(s, mu) go with --s-mu (.csv, .npy or .json,
    /// or - for standard output): s_lo, s_hi, xi0, xi2, xi4, each xi_l(s)
    /// (2l + 1) times the sum over mu of xi times L_l's integral over the
    /// cell; with --patches their jackknife errors xi0_err, xi2_err, xi4_err.
    #[arg(long, value_name = "FILE|-", requires = "s_mu")]
    multipoles: Option<String>,
    /// A patch number (0, 1, ...) per data point, a 1-D .npy or one number a
    /// line: xi is estimated again with each patch left out, and its jackknife
    /// errors written beside it (TreeCorr's var_method="jackknife").
    #[arg(long, value_name = "FILE", requires = "random_patches")]
    patches: Option<String>,
    /// A patch number per random point, the same patches as the data's.
    #[arg(long, value_name = "FILE", requires = "patches")]
    random_patches: Option<String>,
    /// Where the jackknife covariance of xi between buckets goes (.csv, .npy
    /// or .json): a row per bucket, its edges, then one column per bucket.
    #[arg(long, value_name = "FILE", requires = "patches")]
    cov: Option<String>,
    /// The pair-distance histogram to count with (a spec with sets="1,2"):
    /// sdh by default, dd_periodic with --box.
    #[arg(long)]
    problem: Option<String>,
    /// Buckets and range: bins, r_min, r_max (sdh's parameters).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Log-spaced distance buckets (r_min > 0), as correlation functions are usually binned.
    #[arg(long)]
    log_bins: bool,
    /// landy-szalay ((DD - 2DR + RR) / RR, the default with randoms) or
    /// natural (DD / RR - 1, the one there is with --box).
    #[arg(long, value_enum)]
    estimator: Option<Estimator>,
    /// What a catalogue's counts are divided by: pairs (N(N-1)/2, the number
    /// of distinct pairs; Corrfunc's theory.xi) or squared (N^2/2: Corrfunc's
    /// convert_3d_counts_to_cf and TreeCorr).
    #[arg(long, value_enum, default_value = "pairs")]
    norm: Norm,
    /// Where xi goes: a .csv, .npy or .json file, or - for standard output (the default).
    #[arg(long, value_name = "FILE|-")]
    out: Option<String>,
    /// The format, whatever the file is called.
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// Draw xi(r) to FILE.png or FILE.svg.
    #[arg(long, value_name = "FILE.png|svg")]
    plot: Option<PathBuf>,
    /// auto, cuda or cpu.
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendArg,
    /// CPU threads (default: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Values per point: of a raw binary input, or of synthetic points where the
    /// problem takes its dimension from the input.
    #[arg(long)]
    dims: Option<u32>,
    /// Seed of synthetic inputs (the randoms use seed + 1).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Standard output carries xi alone.
    #[arg(long)]
    quiet: bool,
    /// Write a JSON report to FILE (- for stdout): xi and its counts, and each
    /// count's run (backend, device, index and why, schedule, timings, plans).
    #[arg(long, value_name = "FILE|-")]
    report: Option<String>,
}

pub(super) fn xi_command(args: XiArgs) -> anyhow::Result<()> {
    let estimator = estimator_of(&args)?;
    let los = match (args.rp_pi, args.s_mu) {
        (Some(_), _) => Some(LineOfSight::Pi),
        (None, Some(_)) => Some(LineOfSight::Mu),
        (None, None) => None,
    };
    let (problem, params) = problem_and_params(&args, los)?;
    let opts = InputOptions { dims: args.dims, drop_nonfinite: false, seed: args.seed };
    // With --radec the files hold two values a point, made three (unit vectors) below.
    let problem = if args.radec { problem } else { with_input_dims(problem, &args.data, &opts)? };
    let targets = Targets::check(&args, los)?;
    crate::memory::check_threads(args.threads).map_err(|e| anyhow::anyhow!("--threads {}: {e}", args.threads))?;
    let workers = Workers {
        backend: args.backend.choice(),
        threads: args.threads,
        gpu: GpuOptions { streams: 2, ..Default::default() },
        progress: if args.quiet { Progress::Off } else { Progress::Terminal },
        cache: Cache::user()?,
        ranks: None,
        root_sends_points: false,
    };
    let on = (Options::default(), &workers);
    let (data, randoms) = catalogues(&args, &problem, &opts)?;
    let patches = match (&args.patches, &args.random_patches) {
        (Some(d), Some(r)) => Some((
            read_patches(d, data.a.len()).context("--patches")?,
            read_patches(r, randoms.as_ref().map_or(0, |r| r.a.len())).context("--random-patches")?,
        )),
        _ => None,
    };
    let (counts, runs) = xi::count_cells(&problem, &params, &data, randoms.as_ref(), estimator, los, on)?;
    let started = std::time::Instant::now();
    let jackknife = match &patches {
        Some((dp, rp)) => Some(xi::jackknife(
            &problem,
            &params,
            (&data, dp),
            randoms.as_ref().map(|r| (r, &rp[..])),
            estimator,
            args.norm,
            &counts,
            on,
        )?),
        None => None,
    };
    let jackknife_s = started.elapsed().as_secs_f64();
    let found = Found { counts, runs, estimator, los, jackknife };
    targets.write(&found, &args)?;
    if let Some(report_target) = &targets.report {
        crate::write::document(report_target, &found.report(&problem, &params, args.norm))?;
    }
    if !args.quiet {
        found.say(&problem, &params, &targets, &args, jackknife_s);
    }
    Ok(())
}

/// The estimator the flags ask for (Landy-Szalay with randoms, natural with a box).
fn estimator_of(args: &XiArgs) -> anyhow::Result<Estimator> {
    Ok(match (args.estimator, &args.box_size) {
        (Some(Estimator::LandySzalay), Some(_)) => anyhow::bail!(
            "--estimator landy-szalay with --box: without randoms DR and RR are both analytic and Landy-Szalay is the natural estimator; leave --estimator out"
        ),
        (Some(e), _) => e,
        (None, Some(_)) => Estimator::Natural,
        (None, None) => Estimator::LandySzalay,
    })
}

/// The problem that counts the pairs (the flags' built-in, or --problem)
/// and its parameters: the flags' first, so that a --param of the same
/// name overrides them.
fn problem_and_params(
    args: &XiArgs,
    los: Option<LineOfSight>,
) -> anyhow::Result<(crate::spec::Problem, crate::spec::Params)> {
    let default_problem = match (&args.box_size, args.radec, los) {
        (_, _, Some(LineOfSight::Pi)) => "ddrppi",
        (_, _, Some(LineOfSight::Mu)) => "ddsmu",
        (Some(_), _, None) => "dd_periodic",
        (None, true, None) => "ddtheta",
        (None, false, None) => "sdh",
    };
    let problem = load(args.problem.as_deref().unwrap_or(default_problem), args.log_bins)?;
    let mut param_args = Vec::new();
    if let Some(pimax) = args.rp_pi {
        if !(pimax.is_finite() && pimax > 0.0) {
            anyhow::bail!("--rp-pi {pimax}: PIMAX must be a positive number");
        }
        param_args.push(format!("pi_max={pimax}"));
        if !args.params.iter().any(|p| p.trim_start().starts_with("pi_bins=")) {
            if pimax.fract() != 0.0 || pimax > 1e6 {
                anyhow::bail!(
                    "--rp-pi {pimax}: pi buckets are 1 wide by default (Corrfunc's), which needs a whole PIMAX; give their number with --param pi_bins=N"
                );
            }
            param_args.push(format!("pi_bins={pimax}"));
        }
    }
    if let Some(bins) = args.s_mu {
        param_args.push(format!("mu_bins={bins}"));
    }
    param_args.extend(args.params.iter().cloned());
    if let Some(b) = &args.box_size {
        if args.params.iter().any(|p| p.starts_with("box=")) {
            anyhow::bail!("--box and --param box=...: give the box once");
        }
        param_args.push(format!("box={b}"));
    }
    let params = bind(&problem, &param_args)?;
    Ok((problem, params))
}

/// The data and the randoms, each a set of the problem's points (unit
/// vectors with --radec), with a weight column where either is weighted (a
/// missing one all ones).
fn catalogues(
    args: &XiArgs,
    problem: &crate::spec::Problem,
    opts: &InputOptions,
) -> anyhow::Result<(Inputs, Option<Inputs>)> {
    let components = match args.radec {
        false => problem.input.element.components(),
        true => ["ra", "dec"]
            .map(|name| crate::spec::Component { name: name.into(), scalar: crate::spec::Scalar::F64 })
            .to_vec(),
    };
    let on_the_sky = |set: crate::data::PointSet| match args.radec {
        true => xi::unit_vectors(&set),
        false => Ok(set),
    };
    let mut data = on_the_sky(read_input(&args.data, &components, opts).context("--data")?)?;
    let mut randoms = match &args.randoms {
        Some(file) => Some(on_the_sky(
            read_input(file, &components, &InputOptions { seed: args.seed + 1, ..opts.clone() })
                .context("--randoms")?,
        )?),
        None => None,
    };
    if args.random_weights.is_some() && randoms.is_none() {
        anyhow::bail!("--random-weights without --randoms: with --box the randoms are analytic");
    }
    if args.data_weights.is_some() || args.random_weights.is_some() {
        let sets = [Some((&mut data, &args.data_weights)), randoms.as_mut().map(|r| (r, &args.random_weights))];
        for (set, file) in sets.into_iter().flatten() {
            let weights = match file {
                Some(file) => data::read_weights(file, set.len())?,
                None => crate::data::Column::F64(vec![1.0; set.len()]),
            };
            set.columns.push(weights);
        }
    }
    Ok((Inputs { a: data, b: None }, randoms.map(|a| Inputs { a, b: None })))
}

/// Where xi, wp, the covariance, the report and the plot go, checked before
/// anything is read: writable, and none of them an input or another.
struct Targets {
    xi: ResultTarget,
    report: Option<ResultTarget>,
    wp: Option<ResultTarget>,
    multipoles: Option<ResultTarget>,
    cov: Option<ResultTarget>,
}

impl Targets {
    fn check(args: &XiArgs, los: Option<LineOfSight>) -> anyhow::Result<Targets> {
        let format = args.format.map(FormatArg::format);
        let xi = match args.out.as_deref() {
            None | Some("-") => ResultTarget::new(Destination::Stdout, format)?,
            Some(path) => ResultTarget::new(Destination::File(path.into()), format)?,
        };
        let mut written = Vec::new();
        if let Destination::File(path) = &xi.destination {
            written.push(Named::new("--out", path));
        }
        if let Some(path) = &args.plot {
            plot::check(path)?;
            written.push(Named::new("--plot", path));
        }
        if args.plot.is_some() && los == Some(LineOfSight::Mu) {
            anyhow::bail!("--plot draws xi(r), w(theta) or wp(rp); xi(s, mu) has two axes: write it with --out");
        }
        let json = Some(crate::write::Format::Json);
        let beside = |flag: &str, given: Option<&str>, format, written: &mut Vec<Named>| -> anyhow::Result<_> {
            Ok(match given {
                None => None,
                Some("-") if xi.destination == Destination::Stdout => {
                    anyhow::bail!("--out - and {flag} - both want standard output; send one of them to a file")
                }
                Some("-") => Some(ResultTarget::new(Destination::Stdout, format)?),
                Some(path) => {
                    written.push(Named::new(flag, path));
                    Some(ResultTarget::new(Destination::File(path.into()), format)?)
                }
            })
        };
        let report = beside("--report", args.report.as_deref(), json, &mut written)?;
        let wp = beside("--wp", args.wp.as_deref(), format, &mut written)?;
        let multipoles = beside("--multipoles", args.multipoles.as_deref(), format, &mut written)?;
        let cov = match &args.cov {
            Some(path) => {
                written.push(Named::new("--cov", path));
                Some(ResultTarget::new(Destination::File(path.into()), format)?)
            }
            None => None,
        };
        let read: Vec<Named> = [
            ("--data", Some(&args.data)),
            ("--randoms", args.randoms.as_ref()),
            ("--data-weights", args.data_weights.as_ref()),
            ("--random-weights", args.random_weights.as_ref()),
            ("--patches", args.patches.as_ref()),
            ("--random-patches", args.random_patches.as_ref()),
        ]
        .into_iter()
        .filter_map(|(role, file)| file.filter(|f| std::path::Path::new(f).exists()).map(|f| Named::new(role, f)))
        .collect();
        crate::write::refuse_clashes(&written, &read)?;
        Ok(Targets { xi, report, wp, multipoles, cov })
    }
}

/// What xi counted and estimated.
struct Found {
    counts: xi::PairCounts,
    /// DD, RR, DR's runs.
    runs: Vec<crate::run::Execution>,
    estimator: Estimator,
    los: Option<LineOfSight>,
    jackknife: Option<xi::Jackknife>,
}

impl Targets {
    /// xi with its counts (and jackknife errors), the covariance, wp, and the plot.
    fn write(&self, found: &Found, args: &XiArgs) -> anyhow::Result<()> {
        let counts = &found.counts;
        let xi = counts.xi(found.estimator, args.norm);
        let (rr, dr) = (counts.rr(args.norm), counts.dr());
        let n = xi.len();
        // Separations are distances r, or angles theta in degrees with --radec; or 2-D cells.
        let buckets = bucket_columns(counts, args.radec);
        let mut columns: Vec<(&str, &[f64])> = buckets.iter().map(|(name, c)| (*name, &c[..])).collect();
        let edge_columns = columns.len();
        columns.push(("dd", &counts.dd));
        if let Some(dr) = dr {
            columns.push(("dr", dr));
        }
        columns.extend([("rr", &rr[..]), ("xi", &xi[..])]);
        let errors = found.errors();
        if found.jackknife.is_some() {
            columns.push(("xi_err", &errors));
        }
        crate::write::table(&self.xi, &columns, edge_columns)?;
        if let (Some(j), Some(cov_target)) = (&found.jackknife, &self.cov) {
            let names: Vec<String> = (0..n).map(|i| format!("cov_{i}")).collect();
            let mut cov: Vec<(&str, &[f64])> = buckets.iter().map(|(name, c)| (*name, &c[..])).collect();
            let by_column: Vec<Vec<f64>> = (0..n).map(|c| (0..n).map(|r| j.covariance[r][c]).collect()).collect();
            cov.extend(names.iter().map(|s| s.as_str()).zip(by_column.iter().map(|c| &c[..])));
            crate::write::table(cov_target, &cov, edge_columns)?;
        }
        let wp = counts.wp(&xi);
        let rp = &counts.edges;
        if let (Some(wp), Some(wp_target)) = (&wp, &self.wp) {
            let m = wp.len();
            crate::write::table(wp_target, &[("rp_lo", &rp[..m]), ("rp_hi", &rp[1..]), ("wp", wp)], 2)?;
        }
        if let Some(target) = &self.multipoles {
            found.write_multipoles(target, &xi)?;
        }
        if let Some(path) = &args.plot {
            plot::draw(&found.figure(&xi, wp.as_deref(), args), path)?;
        }
        Ok(())
    }
}

/// The multipoles `twobs xi --multipoles` writes.
const ELLS: [u32; 3] = [0, 2, 4];

impl Found {
    /// xi0, xi2, xi4 of xi(s, mu) by s bucket, with the jackknife's errors where there are patches.
    fn write_multipoles(&self, target: &ResultTarget, xi: &[f64]) -> anyhow::Result<()> {
        let c = &self.counts;
        let multipoles = c.multipoles(xi, &ELLS).expect("--multipoles requires --s-mu");
        let errors: Option<Vec<Vec<f64>>> = self.jackknife.as_ref().map(|j| {
            let flat = |xi: &[f64]| -> Vec<f64> { c.multipoles(xi, &ELLS).into_iter().flatten().flatten().collect() };
            let cov = xi::jackknife_covariance(&j.xi.iter().map(|x| flat(x)).collect::<Vec<_>>());
            let n = c.edges.len() - 1;
            (0..ELLS.len()).map(|l| (0..n).map(|i| cov[l * n + i][l * n + i].sqrt()).collect()).collect()
        });
        let names = ["xi0", "xi2", "xi4"];
        let error_names = ["xi0_err", "xi2_err", "xi4_err"];
        let s = &c.edges;
        let m = s.len() - 1;
        let mut columns: Vec<(&str, &[f64])> = vec![("s_lo", &s[..m]), ("s_hi", &s[1..])];
        columns.extend(names.iter().copied().zip(multipoles.iter().map(|v| &v[..])));
        if let Some(errors) = &errors {
            columns.extend(error_names.iter().copied().zip(errors.iter().map(|v| &v[..])));
        }
        Ok(crate::write::table(target, &columns, 2)?)
    }
}

impl Found {
    /// The jackknife's error of each bucket, the root of its variance (none without patches).
    fn errors(&self) -> Vec<f64> {
        let n = self.counts.dd.len();
        self.jackknife.iter().flat_map(|j| (0..n).map(|i| j.covariance[i][i].sqrt())).collect()
    }

    /// wp(rp) where there is one, else xi(r) or w(theta).
    fn figure<'a>(&'a self, xi: &'a [f64], wp: Option<&'a [f64]>, args: &XiArgs) -> plot::Figure<'a> {
        let c = &self.counts;
        let (what, x, y, values, label) = match wp {
            Some(wp) => ("wp(rp)", "rp", "wp(rp)", wp, "wp"),
            None if args.radec => ("w(θ)", "θ (degrees)", "w(θ)", xi, "ξ"),
            None => ("ξ(r)", "r", "ξ(r)", xi, "ξ"),
        };
        plot::Figure {
            title: format!("{what}, {}: {} data points, {}", self.estimator.name(), c.data_points, against(c)),
            x_label: x.into(),
            y_label: y.into(),
            log_x: args.log_bins,
            series: vec![plot::Series { label: label.into(), edges: &c.edges, values }],
        }
    }

    /// The JSON report: xi with its counts, and how each count ran.
    fn report(&self, problem: &crate::spec::Problem, params: &crate::spec::Params, norm: Norm) -> serde_json::Value {
        let c = &self.counts;
        let xi = c.xi(self.estimator, norm);
        let runs: serde_json::Map<String, serde_json::Value> = ["DD", "RR", "DR"]
            .iter()
            .zip(&self.runs)
            .map(|(what, run)| (what.to_string(), report::execution(run)))
            .collect();
        serde_json::json!({
            "problem": { "name": problem.name, "origin": problem.origin, "summary": problem.summary },
            "params": params.values.iter().map(|(n, v)| (n.clone(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
            "estimator": self.estimator.name(),
            "norm": match norm { Norm::Pairs => "pairs", Norm::Squared => "squared" },
            "data_points": c.data_points,
            "against": against(c),
            "result": {
                "edges": c.edges, "dd": c.dd, "dr": c.dr(), "rr": c.rr(norm), "xi": xi,
                "xi_err": self.jackknife.is_some().then(|| self.errors()),
                "cells": c.cells.as_ref().map(|(los, e)| serde_json::json!({ "axes": los.axes(), "second_edges": e })),
                "wp": c.wp(&xi),
            },
            "runs": runs,
        })
    }

    /// The summary on the terminal (standard error where xi goes to standard output).
    fn say(
        &self,
        problem: &crate::spec::Problem,
        params: &crate::spec::Params,
        targets: &Targets,
        args: &XiArgs,
        jackknife_s: f64,
    ) {
        let c = &self.counts;
        let say = |line: String| match targets.xi.destination {
            Destination::Stdout => eprintln!("{line}"),
            Destination::File(_) => println!("{line}"),
        };
        say(format!(
            "{} by the {} estimator: {} data points, {}, counts over {}, {}",
            match self.los {
                None if args.radec => "w(theta)",
                None => "xi(r)",
                Some(LineOfSight::Pi) => "xi(rp, pi)",
                Some(LineOfSight::Mu) => "xi(s, mu)",
            },
            self.estimator.name(),
            c.data_points,
            against(c),
            match args.norm {
                Norm::Pairs => "N(N-1)/2",
                Norm::Squared => "N^2/2",
            },
            contribution::describe(problem, params)
        ));
        for (what, run) in ["DD", "RR", "DR"].iter().zip(&self.runs) {
            say(format!(
                "{what}: {} pairs on {}, {:.3} s; index {}: {}",
                run.index.pairs,
                run.device,
                run.timings.total_s,
                run.index.name(),
                run.index.why
            ));
        }
        if let Some(j) = &self.jackknife {
            say(format!(
                "jackknife over {} patches (each left out in turn, its pairs with the rest too): {jackknife_s:.3} s",
                j.xi.len()
            ));
        }
        if c.xi(self.estimator, args.norm).iter().any(|x| x.is_nan()) {
            say("xi is NaN (null in JSON) where the randoms have no pair: use more randoms or wider buckets".into());
        }
        if let Destination::File(path) = &targets.xi.destination {
            let n = c.dd.len();
            say(format!("{} {} -> {}", n, if self.los.is_some() { "cells" } else { "buckets" }, path.display()));
        }
        if let Some(Destination::File(path)) = targets.wp.as_ref().map(|t| &t.destination) {
            say(format!("wp(rp) in {} rp buckets -> {}", c.edges.len() - 1, path.display()));
        }
    }
}

/// The columns that name each row's bucket: its lower and upper edges (r, or
/// theta with --radec), or a 2-D cell's four (rp_lo, rp_hi, pi_lo, pi_hi),
/// the first axis outer.
fn bucket_columns(counts: &xi::PairCounts, radec: bool) -> Vec<(&'static str, Vec<f64>)> {
    let e = &counts.edges;
    match &counts.cells {
        None => {
            let (lo, hi) = if radec { ("theta_lo", "theta_hi") } else { ("r_lo", "r_hi") };
            vec![(lo, e[..e.len() - 1].to_vec()), (hi, e[1..].to_vec())]
        }
        Some((los, second)) => {
            let m = second.len() - 1;
            let cells = e.len() - 1;
            let per = |f: &dyn Fn(usize, usize) -> f64| (0..cells * m).map(|c| f(c / m, c % m)).collect::<Vec<f64>>();
            let names = match los {
                LineOfSight::Pi => ["rp_lo", "rp_hi", "pi_lo", "pi_hi"],
                LineOfSight::Mu => ["s_lo", "s_hi", "mu_lo", "mu_hi"],
            };
            vec![
                (names[0], per(&|i, _| e[i])),
                (names[1], per(&|i, _| e[i + 1])),
                (names[2], per(&|_, j| second[j])),
                (names[3], per(&|_, j| second[j + 1])),
            ]
        }
    }
}

/// What DD was compared with, for the report and the plot's title.
fn against(counts: &xi::PairCounts) -> String {
    match &counts.randoms {
        xi::Randoms::Counted { points, .. } => format!("{points} randoms"),
        xi::Randoms::Analytic { volume } => format!("analytic RR in a periodic box of volume {volume}"),
    }
}

/// A patch number per point: whole numbers from 0, as many as the points.
fn read_patches(file: &str, points: usize) -> anyhow::Result<Vec<u32>> {
    let column = [crate::spec::Component { name: "patch".into(), scalar: crate::spec::Scalar::F64 }];
    let set = read_input(file, &column, &InputOptions::default())?;
    if set.len() != points {
        anyhow::bail!("{file}: {} patch numbers for {points} points", set.len());
    }
    (0..set.len())
        .map(|i| match set.columns[0].get_f64(i) {
            p if (0.0..65536.0).contains(&p) && p.fract() == 0.0 => Ok(p as u32),
            p => anyhow::bail!("{file}: row {}: patch {p} is not a whole number from 0 to 65535", i + 1),
        })
        .collect()
}
