//! The `twobs` command line: clap arguments in, library calls out.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

use crate::codegen;
use crate::device::Device;
use crate::plan::{Forced, InputCache, OutputStage, Plan, Points};
use crate::problems;
use crate::spec::{Params, Problem, Sets};

#[derive(Parser)]
#[command(
    name = "twobs",
    version,
    about = "2-body statistics on GPUs: from an XML spec and a CUDA pair function to a planned, generated kernel"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the built-in problems.
    List,
    /// Explain the plan for a problem: every decision and the numbers behind it.
    Plan {
        #[command(flatten)]
        target: Target,
        /// Print the plan as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write the CUDA kernel for a problem.
    Gen {
        #[command(flatten)]
        target: Target,
        /// Write DIR/<problem>.cu instead of printing the kernel.
        #[arg(short = 'o', long = "out-dir", value_name = "DIR")]
        out_dir: Option<PathBuf>,
        /// Also compile the kernel with NVRTC and report its registers and spills.
        #[arg(long)]
        check: bool,
    },
}

/// What to plan for: the problem, the device, the size, and forced choices.
#[derive(Args)]
struct Target {
    /// A built-in problem name (see `twobs list`) or the path of a spec.
    problem: String,
    /// Device profile (titanxp, a100, h100, h200), or auto for the GPU in this machine.
    #[arg(long, default_value = "h100")]
    device: String,
    /// Number of points: N for one set or both, or NxM for sets A and B.
    #[arg(long, default_value = DEFAULT_POINTS, value_name = "N[xM]")]
    points: String,
    /// Override a parameter of the spec.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Force the input cache.
    #[arg(long, value_name = "register_shm|register_roc|shuffle|naive")]
    input_cache: Option<InputCache>,
    /// Force the output stage.
    #[arg(long, value_name = "register|op|aop|global|dob|topk")]
    output: Option<OutputStage>,
    /// Force the number of private output copies (1, 2, 4, 8, 16, 32).
    #[arg(long)]
    copies: Option<u32>,
    /// Force the threads per block (a power of two, 32 to 1024).
    #[arg(long)]
    block_size: Option<u32>,
}

struct Planned {
    problem: Problem,
    params: Params,
    device: Device,
    plan: Plan,
}

impl Target {
    fn forced(&self) -> Forced {
        Forced { input_cache: self.input_cache, output: self.output, copies: self.copies, block_size: self.block_size }
    }

    fn points(&self, sets: Sets) -> anyhow::Result<Points> {
        let parse = |s: &str| {
            s.trim().replace('_', "").parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                anyhow::anyhow!("--points {}: expected a positive whole number, or NxM for two sets", self.points)
            })
        };
        let (a, b) = match self.points.split_once('x') {
            Some((a, b)) => (parse(a)?, Some(parse(b)?)),
            None => (parse(&self.points)?, None),
        };
        Ok(match sets {
            Sets::One if b.is_some() => {
                anyhow::bail!("--points {}: this problem has one set; give one number", self.points)
            }
            Sets::One => Points { a, b: None },
            Sets::Two => Points { a, b: Some(b.unwrap_or(a)) },
        })
    }

    fn plan(&self) -> anyhow::Result<Planned> {
        let problem = problems::load(&self.problem)?;
        let params = problem.bind(&self.params)?;
        let (device, note) = Device::select(&self.device)?;
        if let Some(note) = note {
            eprintln!("note: {note}");
        }
        let points = self.points(problem.input.sets)?;
        let plan = Plan::new(&problem, &params, &device, points, self.forced())?;
        Ok(Planned { problem, params, device, plan })
    }

    /// The command that regenerates this kernel, for its header.
    fn command_line(&self, problem: &Problem, device: &Device) -> String {
        let points = (self.points != DEFAULT_POINTS).then_some(self.points.as_str());
        codegen::regenerate_command(problem, device, points, &self.params, self.forced())
    }
}

const DEFAULT_POINTS: &str = "1000000";

fn list() {
    for name in problems::BUILT_IN {
        let p = problems::built_in(name).expect("built-in");
        println!("{name:<9} {}", p.summary);
    }
    println!("\nEach is problems/<name>.xml with its CUDA snippet; `twobs plan <name>` explains how it runs.");
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::List => list(),
        Command::Plan { target, json } => {
            let p = target.plan()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&p.plan)?);
            } else {
                println!("{} ({}): {}", p.problem.name, p.problem.origin, p.problem.summary);
                println!("output: {}", codegen::output_text(&p.problem, &p.params));
                println!(
                    "device: {} ({}, {}): {} SMs, {} KiB shared/SM, {} KiB shared/block opt-in\n",
                    p.device.name,
                    p.device.origin,
                    p.device.arch(),
                    p.device.multiprocessors,
                    p.device.shared_per_sm / 1024,
                    p.device.shared_per_block_optin / 1024
                );
                print!("{}", p.plan);
            }
        }
        Command::Gen { target, out_dir, check } => {
            let p = target.plan()?;
            let cmd = target.command_line(&p.problem, &p.device);
            let kernel = codegen::render(&p.problem, &p.params, &p.plan, &p.device, &cmd)?;
            match out_dir {
                Some(dir) => {
                    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
                    let path = dir.join(&kernel.file_name);
                    std::fs::write(&path, &kernel.source)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    eprintln!(
                        "wrote {} ({}, {} lines)",
                        path.display(),
                        p.plan.variant(),
                        kernel.source.lines().count()
                    );
                }
                None if check => {}
                None => print!("{}", kernel.source),
            }
            if check {
                let compiled = crate::backend::nvrtc::compile(&kernel, &p.device.arch())?;
                eprintln!(
                    "compiled {} for {}: {} registers, {} bytes spilled, {} B cubin",
                    kernel.file_name,
                    compiled.arch,
                    compiled.registers.map_or("?".to_owned(), |r| r.to_string()),
                    compiled.spill_bytes,
                    compiled.cubin.len()
                );
                if std::env::var_os("TWOBS_SHOW_LOG").is_some() {
                    eprintln!("{}", compiled.log);
                }
            }
        }
    }
    Ok(())
}

pub fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
