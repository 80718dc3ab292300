//! `twobs plan`: every decision of a problem's plan and the numbers behind
//! it, and with `--schedule` the schedule of a run on a described machine.

use std::fmt::Write as _;

use clap::Args;

use super::{DEFAULT_STREAMS, Planned, Target};
use crate::data;
use crate::data::{Generator, synthesize};
use crate::device::Device;
use crate::index::{IndexChoice, IndexKind};
use crate::schedule::{self, GpuOptions, Hybrid};
use crate::stage::contribution;

pub(super) fn plan_command(target: &Target, json: bool, schedule: &ScheduleArgs) -> anyhow::Result<()> {
    let p = target.plan()?;
    let mut text = String::new();
    if json {
        writeln!(text, "{}", serde_json::to_string_pretty(&p.plan)?)?;
    } else {
        explain(&p, &mut text)?;
    }
    if schedule.schedule {
        schedule.print(&p, &mut text)?;
    }
    Ok(crate::write::print(&text)?)
}

/// The plan as text: the problem, the device, each decision, and what a run
/// decides from the data.
fn explain(p: &Planned, text: &mut String) -> std::fmt::Result {
    writeln!(text, "{} ({}): {}", p.problem.name, p.problem.origin, p.problem.summary)?;
    writeln!(text, "output: {}", contribution::describe(&p.problem, &p.params))?;
    writeln!(
        text,
        "device: {} ({}, {}): {} SMs, {} KiB shared/SM, {} KiB shared/block opt-in\n",
        p.device.name,
        p.device.origin,
        p.device.arch(),
        p.device.multiprocessors,
        p.device.shared_per_sm / 1024,
        p.device.shared_per_block_optin / 1024
    )?;
    write!(text, "{}", p.plan)?;
    if p.problem.cutoff.is_some() {
        let workers = schedule::Workers::described(&p.device, 1, 0, DEFAULT_STREAMS, crate::memory::host_cores());
        let points = p.plan.shape.points.a.max(p.plan.shape.points.b.unwrap_or(0)) as usize;
        writeln!(
            text,
            "  {:<13} {:<15} {}",
            "hybrid",
            "from the data",
            schedule::describe_hybrid(&schedule::Rates::of(&workers.gpus, workers.cpu_threads()), points)
        )?;
    }
    if let (Some(value), IndexKind::None) = (p.problem.cutoff.as_ref().and_then(|c| c.value.as_ref()), p.plan.index) {
        writeln!(
            text,
            "  {:<13} {:<15} the spec's cutoff {}: a run sorts the points into cells and walks only neighbouring cells where that skips at least half the pairs (the report says what it chose); `--grid` shows that kernel",
            "index",
            "from the data",
            p.params.describe(value)
        )?;
    }
    Ok(())
}

/// `twobs plan --schedule`: the schedule of a run on a described machine.
#[derive(Args)]
pub(super) struct ScheduleArgs {
    /// Also print the schedule of a run of --points uniform points on a
    /// described machine: the index, which GPUs take part and how, the CPU's share.
    #[arg(long)]
    schedule: bool,
    /// With --schedule: GPUs of the --device profile.
    #[arg(long, default_value_t = 1, value_name = "N", requires = "schedule")]
    gpu_count: usize,
    /// With --schedule: the host's cores (this machine's by default).
    #[arg(long, value_name = "N", requires = "schedule")]
    cores: Option<usize>,
    /// With --schedule: whether the CPU's cores take part (as `twobs run --hybrid`).
    #[arg(long, value_enum, default_value = "auto", requires = "schedule")]
    hybrid: Hybrid,
}

impl ScheduleArgs {
    /// The schedule of `p`'s points, drawn uniformly (a sample of them), on
    /// the described machine.
    fn print(&self, p: &Planned, text: &mut String) -> anyhow::Result<()> {
        let components = p.problem.input.components();
        let set = |n: u64, seed: u64| -> anyhow::Result<data::SetShape> {
            let sample = synthesize(Generator::Uniform, n.min(1 << 14), &components, seed)?;
            Ok(data::SetShape::described(n as usize, sample))
        };
        let points = p.plan.shape.points;
        let shapes = data::Shapes { a: set(points.a, 7)?, b: points.b.map(|b| set(b, 8)).transpose()? };
        let cores = self.cores.unwrap_or_else(crate::memory::host_cores);
        let memory = described_memory(&p.device);
        let workers = schedule::Workers::described(&p.device, self.gpu_count, memory, DEFAULT_STREAMS, cores);
        let opts = GpuOptions { streams: DEFAULT_STREAMS, hybrid: self.hybrid, ..Default::default() };
        let made = schedule::Schedule::make(&p.problem, &p.params, &shapes, IndexChoice::Auto, &opts, &workers)?;
        writeln!(
            text,
            "\nschedule on {} x {} ({} GiB each) beside {cores} cores, for uniform points (a sample of 2^14 a set):",
            self.gpu_count,
            p.device.name,
            memory >> 30
        )?;
        for (what, why) in made.describe() {
            writeln!(text, "  {what:<13} {why}")?;
        }
        Ok(())
    }
}

/// The memory of one GPU of `device`'s profile, for a described machine.
fn described_memory(device: &Device) -> usize {
    let gib = match device.name.to_lowercase() {
        n if n.contains("h200") => 141,
        n if n.contains("h100") || n.contains("a100") => 80,
        n if n.contains("titan") => 12,
        _ => 16,
    };
    gib << 30
}
