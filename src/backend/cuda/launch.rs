//! A launch's arguments: each [`Source`] of a plan's parameter list resolved
//! to the device value behind it, so that the kernel's signature (rendered
//! from the same list) and the pushed arguments cannot disagree.

use cudarc::driver::{CudaSlice, LaunchArgs, PushKernelArg};

use super::blocks::DeviceBlock;
use super::outputs::{dob, topk, totals};
use crate::stage::output::Arg;
use crate::stage::{RingShape, Side, Source};

/// A value the launcher can push as a kernel argument.
pub trait PushArg {
    fn push<'a>(&'a self, args: &mut LaunchArgs<'a>);
}

impl<T> PushArg for CudaSlice<T> {
    fn push<'a>(&'a self, args: &mut LaunchArgs<'a>) {
        args.arg(self);
    }
}

impl PushArg for u32 {
    fn push<'a>(&'a self, args: &mut LaunchArgs<'a>) {
        args.arg(self);
    }
}

/// The values behind every [`Source`] for one launch.
pub struct KernelArgs<'a> {
    pub a: &'a DeviceBlock,
    /// The other set's block, for a kernel between two sets.
    pub b: Option<&'a DeviceBlock>,
    /// Points in A's and the other block.
    pub counts: [u32; 2],
    /// Whole-input index of the first point of A's and the other block.
    pub offsets: [u32; 2],
    /// The steps of every block that the launch runs: [first, end).
    pub steps: [u32; 2],
    pub output: DeviceOutput<'a>,
    /// The grid's units and ranges, for a kernel that walks a grid.
    pub grid: Option<GridArgs<'a>>,
}

/// A grid on the device, and the unit a launch starts at.
#[derive(Clone, Copy)]
pub struct GridArgs<'a> {
    pub units: &'a CudaSlice<u32>,
    pub ranges: &'a CudaSlice<u32>,
    pub first: u32,
    /// What a search of rings reads besides.
    pub rings: Option<RingArgs<'a>>,
}

/// The buffers and shape of a search of rings (`visit/rings.cu`).
#[derive(Clone, Copy)]
pub struct RingArgs<'a> {
    pub cell_start: &'a CudaSlice<u32>,
    pub cell_a: &'a CudaSlice<u32>,
    pub perm_a: &'a CudaSlice<u32>,
    pub perm_b: &'a CudaSlice<u32>,
    pub shape: &'a RingShape,
}

// SAFETY: plain old data laid out as the CUDA struct (repr(C), same order and types).
unsafe impl cudarc::driver::DeviceRepr for RingShape {}

impl PushArg for RingShape {
    fn push<'a>(&'a self, args: &mut LaunchArgs<'a>) {
        args.arg(self);
    }
}

impl KernelArgs<'_> {
    fn grid(&self) -> &GridArgs<'_> {
        self.grid.as_ref().expect("a kernel that walks a grid is launched with one")
    }

    fn rings(&self) -> &RingArgs<'_> {
        self.grid().rings.as_ref().expect("a search of rings is launched with its cells")
    }

    /// The argument for `source`. Every source of a plan's list resolves: the
    /// plan lists B's columns only for a kernel between two sets, and the
    /// output's arguments only for its own stage.
    pub fn resolve(&self, source: Source) -> &dyn PushArg {
        let side = |s: Side| match s {
            Side::A => 0,
            Side::B => 1,
        };
        match source {
            Source::Column(Side::A, c) => &self.a.columns[c],
            Source::Column(Side::B, c) => &self.b.expect("a two-set kernel has B's block").columns[c],
            Source::Count(s) => &self.counts[side(s)],
            Source::Offset(s) => &self.offsets[side(s)],
            Source::StepFirst => &self.steps[0],
            Source::StepEnd => &self.steps[1],
            Source::GridUnits => self.grid().units,
            Source::GridRanges => self.grid().ranges,
            Source::UnitFirst => &self.grid().first,
            Source::RingCellStart => self.rings().cell_start,
            Source::RingCellA => self.rings().cell_a,
            Source::RingPermA => self.rings().perm_a,
            Source::RingPermB => self.rings().perm_b,
            Source::RingShape => self.rings().shape,
            Source::Output(arg) => self.output.arg(arg),
        }
    }
}

/// The output's device buffers for one launch.
#[derive(Clone, Copy)]
pub enum DeviceOutput<'a> {
    Totals(&'a totals::DeviceTotals),
    Dob(&'a dob::DeviceDob),
    TopK(&'a topk::DeviceTopK),
}

impl<'a> DeviceOutput<'a> {
    pub fn arg(self, arg: Arg) -> &'a dyn PushArg {
        match (self, arg) {
            (DeviceOutput::Totals(d), Arg::Totals(a)) => d.arg(a),
            (DeviceOutput::Dob(d), Arg::Dob(a)) => d.arg(a),
            (DeviceOutput::TopK(d), Arg::TopK(a)) => d.arg(a),
            _ => unreachable!("a plan lists only its own output stage's arguments"),
        }
    }
}
