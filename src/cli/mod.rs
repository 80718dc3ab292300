//! The `twobs` command line: clap arguments in, library calls out. Each
//! command has its own module; what several commands share is here.

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

use crate::backend::cuda;
use crate::data::{self, InputOptions};
use crate::device::{Device, PROFILE_NAMES};
use crate::plan::{Forced, Plan, Points};
use crate::problems;
use crate::run::BackendChoice;
use crate::spec::{Element, Params, Problem, Sets, Spacing};
use crate::stage::contribution::Test;
use crate::stage::input::InputCache;
use crate::stage::output::OutputChoice;
use crate::write::Format;

// `gen` is a reserved word in Rust 2024; the file is still gen.rs.
mod r#gen;
mod list;
mod plan;
mod run;
mod tune;
mod xi;

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
        #[command(flatten)]
        schedule: plan::ScheduleArgs,
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
        /// With --check: write NVRTC's CUBIN to FILE (for nvdisasm or cuobjdump).
        #[arg(long, value_name = "FILE", requires = "check")]
        cubin: Option<PathBuf>,
    },
    /// Compute a problem on data: exact results on the GPU or the CPU.
    Run(run::RunArgs),
    /// Time every kernel shape of the totals kernels on this GPU and store the
    /// fastest in its tuned profile, which later plans on it read.
    Tune(tune::TuneArgs),
    /// The two-point correlation function xi(r) of a catalogue against randoms:
    /// DD, RR (and DR) pair counts in distance buckets, and an estimator.
    Xi(xi::XiArgs),
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum BackendArg {
    Auto,
    Cuda,
    Cpu,
}

impl BackendArg {
    fn choice(self) -> BackendChoice {
        match self {
            BackendArg::Auto => BackendChoice::Auto,
            BackendArg::Cuda => BackendChoice::Cuda,
            BackendArg::Cpu => BackendChoice::Cpu,
        }
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    Csv,
    Npy,
    Json,
}

impl FormatArg {
    fn format(self) -> Format {
        match self {
            FormatArg::Csv => Format::Csv,
            FormatArg::Npy => Format::Npy,
            FormatArg::Json => Format::Json,
        }
    }
}

/// `--param` values bound to the problem's parameters.
fn bind(problem: &Problem, params: &[String]) -> anyhow::Result<Params> {
    Ok(problem.bind(params)?)
}

/// A built-in or a spec, with log-spaced buckets when asked.
fn load(name: &str, log_bins: bool) -> anyhow::Result<Problem> {
    let problem = problems::load(name)?;
    Ok(if log_bins { problem.with_spacing(Spacing::Log)? } else { problem })
}

/// The problem for the points of `input`: of its dimension where the spec
/// takes it from the input (`dims_from_input`), else refused when it differs.
fn with_input_dims(problem: Problem, input: &str, opts: &InputOptions) -> anyhow::Result<Problem> {
    if !matches!(problem.input.element, Element::Vector { .. }) {
        return Ok(problem);
    }
    Ok(match data::values_per_point(input, opts)? {
        Some(dims) => problem.with_dims(dims).with_context(|| format!("--input {input}"))?,
        None => problem,
    })
}

/// Plan decisions forced for an experiment.
#[derive(Args)]
struct ForcedArgs {
    /// Force the input cache.
    #[arg(long, value_name = "register_shm|register_roc|shuffle|naive")]
    input_cache: Option<InputCache>,
    /// Force the output stage.
    #[arg(long, value_name = "register|op|aop|global|dob|topk")]
    output: Option<OutputChoice>,
    /// Force the number of private output copies (1, 2, 4, 8, 16, 32).
    #[arg(long)]
    copies: Option<u32>,
    /// Force the threads per block (a power of two, 32 to 1024).
    #[arg(long)]
    block_size: Option<u32>,
    /// Force the own points per thread (1, 2, 4, 8).
    #[arg(long)]
    points_per_thread: Option<u32>,
    /// Force how pairs are tested: on their values, or on the spec's key.
    #[arg(long, value_name = "values|keys")]
    test: Option<Test>,
}

impl ForcedArgs {
    fn forced(&self) -> Forced {
        Forced {
            input_cache: self.input_cache,
            output: self.output,
            copies: self.copies,
            block_size: self.block_size,
            points_per_thread: self.points_per_thread,
            test: self.test,
        }
    }
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
    /// Space the histogram's buckets logarithmically (min > 0).
    #[arg(long)]
    log_bins: bool,
    /// Values per point, for a problem that takes its dimension from the input.
    #[arg(long)]
    dims: Option<u32>,
    /// The kernel whose blocks walk a grid's units (a spec with a <cutoff>;
    /// a run takes it where its data make the grid skip half the pairs).
    #[arg(long)]
    grid: bool,
    #[command(flatten)]
    forced: ForcedArgs,
}

/// A problem planned for a device: what `plan` explains and `gen` renders.
struct Planned {
    problem: Problem,
    params: Params,
    device: Device,
    plan: Plan,
}

impl Target {
    /// `--points N` or `NxM`; one number for a problem of two sets means N x N,
    /// unless the spec also allows one set (`sets="1,2"`).
    fn points(&self, problem: &Problem) -> anyhow::Result<Points> {
        let parse = |s: &str| {
            s.trim().replace('_', "").parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                anyhow::anyhow!("--points {}: expected a positive whole number, or NxM for two sets", self.points)
            })
        };
        let (a, b) = match self.points.split_once('x') {
            Some((a, b)) => (parse(a)?, Some(parse(b)?)),
            None => (parse(&self.points)?, None),
        };
        Ok(match problem.input.sets {
            _ if problem.input.either => Points { a, b },
            Sets::One if b.is_some() => {
                anyhow::bail!("--points {}: this problem has one set; give one number", self.points)
            }
            Sets::One => Points { a, b: None },
            Sets::Two => Points { a, b: Some(b.unwrap_or(a)) },
        })
    }

    fn plan(&self) -> anyhow::Result<Planned> {
        let problem = load(&self.problem, self.log_bins)?;
        let params = bind(&problem, &self.params)?;
        let device = select_device(&self.device)?;
        let points = self.points(&problem)?;
        let problem = problem.with_sets(if points.b.is_some() { 2 } else { 1 })?;
        let problem = match self.dims {
            Some(dims) => problem.with_dims(dims).context("--dims")?,
            None => problem,
        };
        let forced = self.forced.forced();
        let plan = match (self.grid, &problem.cutoff) {
            (false, _) => Plan::new(&problem, &params, &device, points, forced)?,
            (true, Some(_)) => Plan::grid(&problem, &params, &device, points, forced)?,
            (true, None) => {
                anyhow::bail!("--grid: `{}` declares no <cutoff>, so its pairs are never found on a grid", problem.name)
            }
        };
        Ok(Planned { problem, params, device, plan })
    }
}

const DEFAULT_POINTS: &str = "1000000";
const DEFAULT_STREAMS: usize = 2;

/// `--device`: a profile name, or `auto` for the GPU in this machine (the h100
/// profile, with a note, when there is none).
fn select_device(name: &str) -> anyhow::Result<Device> {
    if name == "auto" {
        return Ok(cuda::live_device(0).unwrap_or_else(|why| {
            eprintln!("note: --device auto: no usable GPU ({why}); planning for the h100 profile");
            Device::profile("h100").expect("h100 profile exists")
        }));
    }
    Device::profile(name).ok_or_else(|| {
        anyhow::anyhow!("unknown device `{name}`; expected auto or one of: {}", PROFILE_NAMES.join(", "))
    })
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::List => list::list()?,
        Command::Run(args) => run::run_command(args)?,
        Command::Tune(args) => tune::tune_command(args)?,
        Command::Xi(args) => xi::xi_command(args)?,
        Command::Plan { target, json, schedule } => plan::plan_command(&target, json, &schedule)?,
        Command::Gen { target, out_dir, check, cubin } => r#gen::gen_command(&target, out_dir, check, cubin)?,
    }
    Ok(())
}

/// On SIGINT, SIGTERM or SIGHUP: remove the files half written, then exit as
/// a shell reports a process the signal ended (128 + its number: 130 for
/// SIGINT, 143 for SIGTERM), so that no partial file is left. The signals are
/// blocked in this thread, and so in every thread started after it, and
/// taken by one thread of their own that waits for them. A signal this
/// process was started with ignored (`nohup` ignores SIGHUP, a shell's
/// background job SIGINT) stays ignored, as the shells and coreutils leave it.
fn remove_partial_files_on_signal() {
    const SIGNALS: [(libc::c_int, &str); 3] =
        [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM"), (libc::SIGHUP, "SIGHUP")];
    let taken: Vec<libc::c_int> = SIGNALS.iter().map(|(s, _)| *s).filter(|&s| !ignored_at_start(s)).collect();
    if taken.is_empty() {
        return;
    }
    // SAFETY: a sigset_t is plain data that sigemptyset initialises; the
    // mask is changed before this process starts any other thread.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &signal in &taken {
            libc::sigaddset(&mut set, signal);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        set
    };
    std::thread::spawn(move || {
        let mut signal: libc::c_int = 0;
        // SAFETY: `set` is initialised and its signals are blocked in every thread.
        while unsafe { libc::sigwait(&set, &mut signal) } != 0 {}
        let name = SIGNALS.iter().find(|(s, _)| *s == signal).map_or("a signal", |(_, n)| n);
        eprintln!("twobs: stopped by {name}; files not yet complete were removed");
        crate::write::remove_partial_files_and_exit(128 + signal)
    });
}

/// Whether `signal` was ignored (SIG_IGN) when this process started: asked
/// before anything changes its disposition.
fn ignored_at_start(signal: libc::c_int) -> bool {
    // SAFETY: sigaction with a null new action only reads the disposition
    // into `old`, which is plain data.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// The command line on `args` (the program's name first, as
/// `std::env::args_os` gives them): its exit status. The `twobs` program and
/// the Python package's `twobs` command (`python/twobs/_cli.py`) both start here.
pub fn main(args: impl IntoIterator<Item = std::ffi::OsString>) -> u8 {
    default_signals();
    crate::remedy::enter_through(crate::remedy::Door::CommandLine);
    remove_partial_files_on_signal();
    guarded(|| run(Cli::parse_from(args)))
}

/// Rust (and Python) ignore SIGPIPE, so `twobs plan sdh | head` would fail
/// writing to a closed pipe; like other Unix tools, twobs should just stop.
/// SIGXFSZ is ignored instead: a file past `ulimit -f` then fails its write
/// with EFBIG, an error that removes the partial file, rather than killing
/// the process.
fn default_signals() {
    // SAFETY: sets two signals' process-wide dispositions; nothing of
    // twobs's runs yet, and no handler is replaced (Python's SIGPIPE is SIG_IGN).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// The exit status of an internal error (a panic): EX_SOFTWARE of sysexits.h.
pub const INTERNAL_ERROR: u8 = 70;

/// Runs a command: its error becomes `error: ...` and status 1; a panic in
/// it, or in a thread it joined, becomes one line that says where and asks
/// for a report, and status [`INTERNAL_ERROR`]. Partial files are removed
/// as the panic unwinds (`write::file_atomically`). TWOBS_BACKTRACE=1 also
/// prints the panic's own message and a backtrace.
pub fn guarded(command: impl FnOnce() -> anyhow::Result<()>) -> u8 {
    static FIRST_PANIC: Mutex<Option<String>> = Mutex::new(None);
    let backtrace = std::env::var_os("TWOBS_BACKTRACE").is_some_and(|v| v != "0");
    std::panic::set_hook(Box::new(move |info| {
        let mut first = FIRST_PANIC.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let at = info.location().map_or(String::new(), |l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()));
            *first = Some(format!("{message}{at}"));
        }
        if backtrace {
            eprintln!("{info}\n{}", std::backtrace::Backtrace::force_capture());
        }
    }));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(command));
    let _ = std::panic::take_hook();
    // What is left in standard output's buffer, written before the status is known.
    let outcome = match outcome {
        Ok(Ok(())) => Ok(std::io::Write::flush(&mut std::io::stdout())
            .map_err(|e| anyhow::Error::new(crate::write::StdoutFailed(e)))),
        other => other,
    };
    match outcome {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => match e.chain().find_map(|c| c.downcast_ref::<crate::write::StdoutFailed>()) {
            Some(failed) if failed.closed() => ended_by_closed_pipe(),
            _ => {
                eprintln!("error: {}", error_line(&e));
                1
            }
        },
        Err(_) => {
            crate::write::remove_partial_files();
            let what = FIRST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
            let what = what.as_deref().unwrap_or("a panic");
            // `println!` panics where standard output fails: an I/O error, not a bug.
            if let Some(cause) = what.strip_prefix(PRINT_PANIC) {
                if cause.contains(&format!("(os error {})", libc::EPIPE)) {
                    return ended_by_closed_pipe();
                }
                let cause = cause.rsplit_once(" at ").map_or(cause, |(c, _)| c);
                eprintln!("error: cannot write to standard output: {cause}");
                return 1;
            }
            eprintln!("{}", internal_error_line(what));
            INTERNAL_ERROR
        }
    }
}

/// Where the reader of standard output went away (`twobs list | head -1`:
/// head has what it wanted): no message, and the status of a process that
/// SIGPIPE ended, as coreutils' `seq` and `cat` end there (the shell shows
/// nothing; a pipeline's status is head's).
fn ended_by_closed_pipe() -> u8 {
    // SAFETY: restoring SIGPIPE's default action and raising it end the
    // process; nothing runs after on this or another thread.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        libc::raise(libc::SIGPIPE);
    }
    128 + libc::SIGPIPE as u8
}

/// How std's `print!` family's panic begins where writing standard output failed.
const PRINT_PANIC: &str = "failed printing to stdout: ";

/// An error and its causes on one line, as `{:#}` shows them, but each
/// cause once: one whose text the line already holds (a message that quotes
/// its cause, which is also its source) is not repeated.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

/// The one line an internal error prints.
pub fn internal_error_line(what: &str) -> String {
    format!(
        "twobs: internal error: {what}. This is a bug in twobs {}, not in your input; no result was written. Please report it with the command you ran (TWOBS_BACKTRACE=1 adds a backtrace).",
        env!("CARGO_PKG_VERSION")
    )
}
