//! The input family: where the "other" points of each pair are cached while a
//! block works on them, the kernel parameters that bring the points in, and
//! (`backend::cuda::blocks` holds one block of a set on the device).
//!
//! Fragment contract (`templates/input/*.cu`): defines `TILE_ALIGN`, the
//! multiple of points a tile may start at, and `struct Tiles` with
//! - `explicit Tiles(unsigned char* smem)`: its tile starts at `smem` (byte 0);
//! - `void load(const Set& s, unsigned start)`: every thread of the block calls
//!   it; afterwards points `start .. start + B` of `s` are available (rows past
//!   `s.n` are padding and may be read, never counted);
//! - `template <class F> void for_each(unsigned len, F&& f)`: calls
//!   `f(jl, q)` for `jl` in `0 .. len` in order, `q` the tile's point `jl`;
//! - `Point at(unsigned jl)`, only where [`InputCache::random_access`] holds.

use super::output::OutputClass;
use super::{KernelParam, Side, Source, Template};
use crate::device::Device;
use crate::model::{self, BlockNeeds};
use crate::spec::{Input, Sets};

/// Rows of each component array are padded to a multiple of this many points,
/// so that whole tiles, paired loads and a block's B x R own points (B <= 1024,
/// R <= 8) stay in bounds.
pub const PAD_POINTS: usize = 8192;

/// Where the other points of each pair are cached: the enum is the device's
/// vocabulary (a tuned profile names it), its rules live here.
pub use crate::device::InputCache;

impl InputCache {
    pub const ALL: [InputCache; 4] =
        [InputCache::RegisterShm, InputCache::RegisterRoc, InputCache::Shuffle, InputCache::Naive];

    pub fn name(self) -> &'static str {
        match self {
            InputCache::RegisterShm => "register_shm",
            InputCache::RegisterRoc => "register_roc",
            InputCache::Shuffle => "shuffle",
            InputCache::Naive => "naive",
        }
    }

    /// The planning rule (paper Fig. 9): a Type-II output needs shared memory
    /// for its copies, so its tiles go through the read-only cache when the
    /// tiles of every resident block fit it, else around the warp by shuffles;
    /// every other output leaves shared memory to the tile.
    pub fn choose(class: OutputClass, block_size: u32, registers: u32, input: &Input, dev: &Device) -> (Self, String) {
        if class != OutputClass::TypeII {
            return (
                InputCache::RegisterShm,
                "tiles in shared memory: the lowest-latency cache, free for input since the output is not there".into(),
            );
        }
        let element_bytes = input.bytes();
        let blocks =
            model::occupancy(dev, BlockNeeds { threads: block_size, shared_bytes: 0, registers_per_thread: registers })
                .map_or(1, |o| o.blocks_per_sm);
        let working_set = blocks * block_size * element_bytes;
        // Where L1 and shared memory are one array, count on what is left at the largest shared carve-out.
        let capacity = if dev.unified_l1 {
            dev.readonly_cache_per_sm.saturating_sub(dev.shared_per_sm)
        } else {
            dev.readonly_cache_per_sm
        };
        if working_set <= capacity {
            (
                InputCache::RegisterRoc,
                format!(
                    "Type-II: the tiles of {blocks} resident blocks ({blocks} x {block_size} x {element_bytes} B = {working_set} B) fit the read-only cache ({capacity} B), leaving shared memory to the output"
                ),
            )
        } else {
            (
                InputCache::Shuffle,
                format!(
                    "Type-II: the tiles of {blocks} resident blocks ({working_set} B) overflow the read-only cache ({capacity} B); warp shuffles need no cache"
                ),
            )
        }
    }

    /// Bytes of shared memory the tile takes, at the start of the block's shared memory.
    pub fn tile_bytes(self, block_size: u32, input: &Input) -> u32 {
        match self {
            InputCache::RegisterShm => block_size * input.bytes(),
            _ => 0,
        }
    }

    /// Whether `Tiles::at(j)` exists: shuffled tiles live in other lanes' registers.
    pub fn random_access(self) -> bool {
        self != InputCache::Shuffle
    }

    /// What the fragment renders with: shared tiles are read RUN points of
    /// each component array per 16-byte load (fewer for 8-byte components),
    /// and start where every array's 16-byte loads are aligned.
    pub fn fragment_context(self, input: &Input) -> serde_json::Value {
        let bytes: Vec<u32> = input.components().iter().map(|c| c.scalar.bytes()).collect();
        let (widest, narrowest) = (bytes.iter().max().copied().unwrap_or(4), bytes.iter().min().copied().unwrap_or(4));
        serde_json::json!({ "run": 16 / widest, "align": 16 / narrowest })
    }

    pub fn fragment(self) -> Template {
        match self {
            InputCache::RegisterShm => Template::InputRegisterShm,
            InputCache::RegisterRoc => Template::InputRegisterRoc,
            InputCache::Shuffle => Template::InputShuffle,
            InputCache::Naive => Template::InputNaive,
        }
    }
}

/// The kernel parameters that bring the points in: the component arrays and
/// the size of A's block, the same for the other set's block when the kernel
/// is between two sets, and where both blocks start in the whole input
/// (results use whole-input indices).
pub fn params(input: &Input, sets: Sets) -> Vec<KernelParam> {
    let mut out = Vec::new();
    let components = input.components();
    let side = |side: Side, out: &mut Vec<KernelParam>| {
        for (c, comp) in components.iter().enumerate() {
            out.push(KernelParam {
                name: format!("{}_{}", side.prefix(), comp.name),
                ctype: format!("const {}*", comp.scalar.c_type()),
                source: Source::Column(side, c),
            });
        }
        out.push(KernelParam {
            name: format!("n_{}", side.prefix()),
            ctype: "unsigned".into(),
            source: Source::Count(side),
        });
    };
    side(Side::A, &mut out);
    if sets == Sets::Two {
        side(Side::B, &mut out);
    }
    out.push(KernelParam { name: "a_offset".into(), ctype: "unsigned".into(), source: Source::Offset(Side::A) });
    out.push(KernelParam { name: "other_offset".into(), ctype: "unsigned".into(), source: Source::Offset(Side::B) });
    out
}
