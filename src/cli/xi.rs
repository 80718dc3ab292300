//! `twobs xi`: the two-point correlation function of a catalogue against randoms.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use super::{BackendArg, FormatArg, bind, load, with_input_dims};
use crate::cache::Cache;
use crate::data::{self, InputOptions, Inputs, read_input};
use crate::index::IndexChoice;
use crate::plot;
use crate::run::RunOptions;
use crate::schedule::GpuOptions;
use crate::stage::contribution;
use crate::write::{Destination, Named, Target as ResultTarget};
use crate::xi::{self, Estimator};

#[derive(Args)]
pub(super) struct XiArgs {
    /// The catalogue: a .npy, .csv/.txt or .bin/.raw file of 3-D positions, or uniform:N ...
    #[arg(long, value_name = "FILE|GEN:N")]
    data: String,
    /// Randoms: positions drawn uniformly over the catalogue's volume and mask.
    #[arg(long, value_name = "FILE|GEN:N")]
    randoms: String,
    /// A weight per data point (1-D .npy or one number per line): pair counts
    /// become sums of weight products, normalised by the weight totals.
    #[arg(long, value_name = "FILE")]
    data_weights: Option<String>,
    /// A weight per random point (each 1 when only --data-weights is given).
    #[arg(long, value_name = "FILE")]
    random_weights: Option<String>,
    /// The pair-distance histogram to count with (a spec with sets="1,2").
    #[arg(long, default_value = "sdh")]
    problem: String,
    /// Buckets and range: bins, r_min, r_max (sdh's parameters).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Log-spaced distance buckets (r_min > 0), as correlation functions are usually binned.
    #[arg(long)]
    log_bins: bool,
    /// landy-szalay ((DD - 2DR + RR) / RR, the default) or natural (DD / RR - 1).
    #[arg(long, value_enum, default_value = "landy-szalay")]
    estimator: Estimator,
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
}

pub(super) fn xi_command(args: XiArgs) -> anyhow::Result<()> {
    let problem = load(&args.problem, args.log_bins)?;
    let params = bind(&problem, &args.params)?;
    let opts = InputOptions { dims: args.dims, drop_nonfinite: false, seed: args.seed };
    let problem = with_input_dims(problem, &args.data, &opts)?;
    let components = problem.input.element.components();
    let format = args.format.map(FormatArg::format);
    let target = match args.out.as_deref() {
        None | Some("-") => ResultTarget::new(Destination::Stdout, format)?,
        Some(path) => ResultTarget::new(Destination::File(path.into()), format)?,
    };
    let mut written = Vec::new();
    if let Destination::File(path) = &target.destination {
        written.push(Named::new("--out", path));
    }
    if let Some(path) = &args.plot {
        plot::check(path)?;
        written.push(Named::new("--plot", path));
    }
    let read: Vec<Named> = [
        ("--data", Some(&args.data)),
        ("--randoms", Some(&args.randoms)),
        ("--data-weights", args.data_weights.as_ref()),
        ("--random-weights", args.random_weights.as_ref()),
    ]
    .into_iter()
    .filter_map(|(role, file)| file.filter(|f| std::path::Path::new(f).exists()).map(|f| Named::new(role, f)))
    .collect();
    crate::write::refuse_clashes(&written, &read)?;
    let cache = Cache::user()?;
    let mut data = read_input(&args.data, &components, &opts).context("--data")?;
    let mut randoms =
        read_input(&args.randoms, &components, &InputOptions { seed: args.seed + 1, ..opts }).context("--randoms")?;
    // Weighted, both catalogues carry a weight column; a missing one is all ones.
    if args.data_weights.is_some() || args.random_weights.is_some() {
        for (set, file) in [(&mut data, &args.data_weights), (&mut randoms, &args.random_weights)] {
            let weights = match file {
                Some(file) => data::read_weights(file, set.len())?,
                None => crate::data::Column::F64(vec![1.0; set.len()]),
            };
            set.columns.push(weights);
        }
    }
    let run_opts = RunOptions {
        backend: args.backend.choice(),
        threads: args.threads,
        f64: false,
        quiet: args.quiet,
        gpu: GpuOptions { streams: 2, ..Default::default() },
        verify: false,
        index: IndexChoice::Auto,
        cache,
        ranks: None,
    };
    let (counts, runs) = xi::count(
        &problem,
        &params,
        &Inputs { a: data, b: None },
        &Inputs { a: randoms, b: None },
        args.estimator,
        &run_opts,
    )?;
    let xi = counts.xi(args.estimator);
    let (dd, rr, dr) = (&counts.dd, &counts.rr, &counts.dr);
    let n = xi.len();
    let mut columns: Vec<(&str, &[f64])> = vec![("r_lo", &counts.edges[..n]), ("r_hi", &counts.edges[1..]), ("dd", dd)];
    if let Some(dr) = dr {
        columns.push(("dr", dr));
    }
    columns.extend([("rr", &rr[..]), ("xi", &xi[..])]);
    crate::write::table(&target, &columns, 2)?;
    if let Some(path) = &args.plot {
        let figure = plot::Figure {
            title: format!(
                "ξ(r), {}: {} data points, {} randoms",
                args.estimator.name(),
                counts.data_points,
                counts.random_points
            ),
            x_label: "r".into(),
            y_label: "ξ(r)".into(),
            log_x: args.log_bins,
            series: vec![plot::Series { label: "ξ".into(), edges: &counts.edges, values: &xi }],
        };
        plot::draw(&figure, path)?;
    }
    if !args.quiet {
        let say = |line: String| match target.destination {
            Destination::Stdout => eprintln!("{line}"),
            Destination::File(_) => println!("{line}"),
        };
        say(format!(
            "xi(r) by the {} estimator: {} data points, {} randoms, {}",
            args.estimator.name(),
            counts.data_points,
            counts.random_points,
            contribution::describe(&problem, &params)
        ));
        for (what, run) in ["DD", "RR", "DR"].iter().zip(&runs) {
            say(format!("{what}: {} pairs on {}, {:.3} s", run.shape.pairs, run.device, run.timings.total_s));
        }
        if xi.iter().any(|x| x.is_nan()) {
            say("xi is NaN (null in JSON) where the randoms have no pair: use more randoms or wider buckets".into());
        }
        if let Destination::File(path) = &target.destination {
            say(format!("{} buckets -> {}", n, path.display()));
        }
    }
    Ok(())
}
