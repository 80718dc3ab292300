//! Whether a run tries the cell hierarchy (`index::cells`) in place of its
//! grid or of every pair, and on what terms: decided here for the CPU's
//! threads and for the GPUs alike. The caller builds what this returns
//! ([`Try::build`]); the build gives up, with its reason, where resolving
//! costs more than the alternative it was weighed against.

use crate::data::Inputs;
use crate::index::cells::{self, Applies, Cells, Costs, Leaves};
use crate::index::{IndexChoice, IndexError};
use crate::spec::{Params, Problem};
use crate::stage::visit::Visit;

/// Who walks the leaf pairs the hierarchy leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Walkers {
    /// The CPU backend's threads.
    Cpu,
    /// `count` GPUs, whose grid kernel takes `leaf` own points a unit (B x
    /// R), `streamed` where a set does not fit them whole, and
    /// `ranks_share` where MPI ranks take the units from one counter.
    Gpus { count: usize, leaf: u32, streamed: bool, ranks_share: bool },
}

/// What the hierarchy is weighed against: the pairs the run visits without it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Without {
    EveryPair(u128),
    /// A grid's (estimated) pairs.
    Grid(u128),
}

/// The hierarchy to try: how it counts, its leaves, the costs it is weighed
/// with, and the alternative's cost (none where `--index cells` forces it).
pub struct Try {
    how: Applies,
    leaves: Leaves,
    costs: Costs,
    other: Option<(f64, String)>,
}

impl Try {
    /// The hierarchy of `inputs`, or why it was not worth it.
    pub fn build(&self, inputs: &Inputs, visit: Visit) -> Result<Cells, String> {
        cells::build(&self.how, inputs, visit, self.leaves, self.costs, self.other.clone())
    }
}

/// Per-pair and per-cell-pair costs of a GPU run in nanoseconds of wall
/// time: brute force's keys at 2.5e11 pairs a second (the H200's SDH,
/// docs/planner.md), the grid kernel's units at 1.5e11 (its tiles start
/// before their ranges and stop short), the host's resolver and trees
/// (`cells::CPU_COSTS`) over its cores.
fn gpu_costs(gpus: usize, cores: usize) -> Costs {
    let (gpus, cores) = (gpus.max(1) as f64, cores.max(1) as f64);
    let cpu = cells::CPU_COSTS;
    Costs {
        brute_pair: 1.0 / 250.0 / gpus,
        unit_pair: 1.0 / 150.0 / gpus,
        node_pair: cpu.node_pair / cores,
        tree_point: cpu.tree_point / cores,
    }
}

/// Whether to try the hierarchy for `problem` on `inputs`: where `choice`
/// forces it (an error where it cannot count the problem exactly), or, under
/// `auto`, where it applies (on the GPUs: log-spaced buckets alone, the sets
/// whole on every GPU, no MPI ranks, each of which would add the resolved
/// pairs). None where it is not tried.
#[allow(clippy::too_many_arguments, reason = "the run's facts, each once")]
pub fn hierarchy(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    visit: Visit,
    choice: IndexChoice,
    f64_mode: bool,
    walkers: Walkers,
    without: Without,
) -> Result<Option<Try>, IndexError> {
    let forced = choice == IndexChoice::Cells;
    if !(forced || choice == IndexChoice::Auto) {
        return Ok(None);
    }
    if let Walkers::Gpus { streamed, ranks_share, .. } = walkers
        && (ranks_share || (!forced && (streamed || !cells::tried_by_gpu_auto(problem))))
    {
        return Ok(None);
    }
    let how = match cells::applies(problem, params, inputs, visit, f64_mode) {
        Ok(how) => how,
        Err(why) if forced => return Err(IndexError::NoCells(why)),
        Err(_) => return Ok(None),
    };
    let points = inputs.a.len() + inputs.b.as_ref().map_or(0, |b| b.len());
    let (costs, leaves) = match walkers {
        Walkers::Cpu => (cells::CPU_COSTS, Leaves::of(cells::cpu_leaf(points))),
        Walkers::Gpus { count, leaf, .. } => (gpu_costs(count, crate::memory::host_cores()), Leaves::of(leaf)),
    };
    let other = match without {
        _ if forced => None,
        Without::EveryPair(pairs) => Some((pairs as f64 * costs.brute_pair, "every pair".to_owned())),
        Without::Grid(pairs) => Some((pairs as f64 * costs.unit_pair, "the grid".to_owned())),
    };
    Ok(Some(Try { how, leaves, costs, other }))
}
