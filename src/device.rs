//! What the planner needs to know about a GPU: resource limits, peak rates,
//! and the constants of the output-collision model.

use serde::Serialize;

/// The birthday-collision latency model's constants (paper eq. 2-5).
/// Only their ratio affects the choice of copy count; C_L is the unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModelConstants {
    /// Latency of a round in which no two lanes of a warp hit the same output slot.
    pub c_l: f64,
    /// Extra latency each further colliding lane adds.
    pub c_lp: f64,
    /// Where the numbers come from.
    pub source: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Device {
    /// Profile name, or the live device's name.
    pub name: String,
    /// `profile` or `live GPU <ordinal>`.
    pub origin: String,
    pub compute_capability: (u32, u32),
    pub multiprocessors: u32,
    pub shared_per_sm: u32,
    /// Shared memory a block gets without opting in.
    pub shared_per_block: u32,
    /// Shared memory a block may have after raising its dynamic limit.
    pub shared_per_block_optin: u32,
    /// Shared memory the system reserves for each resident block (1 KiB from sm_80).
    pub shared_reserved_per_block: u32,
    pub registers_per_sm: u32,
    pub max_registers_per_thread: u32,
    pub threads_per_sm: u32,
    pub blocks_per_sm: u32,
    /// Read-only data cache per multiprocessor. Where L1 and shared memory are one
    /// array (`unified_l1`), this is the whole array and shared memory comes out of it.
    pub readonly_cache_per_sm: u32,
    pub unified_l1: bool,
    pub boost_clock_mhz: u32,
    pub fp32_lanes_per_sm: u32,
    pub memory_bandwidth_gbs: f64,
    pub model: ModelConstants,
}

/// Fitted to the paper's Table 5 (theoretical column): with C_L = 1 the copy
/// counts it lists for SDH on 512,000 points come out of the model for C_LP = 0.6
/// (see docs/planner.md for the fit and its residuals).
const PASCAL_FIT: ModelConstants =
    ModelConstants { c_l: 1.0, c_lp: 0.6, source: "fitted to the paper's Table 5 (Titan XP)" };

/// Fitted to SDH on an H100 (50 and 500 buckets, 1 to 32 copies, 1,000,000
/// points): the C_LP whose R x L best matches the measured times (docs/planner.md).
/// Collisions cost little on Hopper next to the atomic throughput itself.
const HOPPER_FIT: ModelConstants =
    ModelConstants { c_l: 1.0, c_lp: 0.03, source: "fitted to SDH times measured on an H100" };

/// No measurement yet on this architecture: the Pascal fit stands in.
const UNMEASURED: ModelConstants =
    ModelConstants { c_l: 1.0, c_lp: 0.6, source: "not yet measured on this GPU; the Titan XP fit stands in" };

pub const PROFILE_NAMES: [&str; 4] = ["titanxp", "a100", "h100", "h200"];

impl Device {
    /// A named profile: titanxp (the paper's GPU), a100, h100, h200.
    pub fn profile(name: &str) -> Option<Device> {
        let kib = |k: u32| k * 1024;
        let d = match name {
            // NVIDIA TITAN Xp (GP102, sm_61): 30 SMs, 96 KiB shared/SM, 48 KiB L1/texture per SM.
            "titanxp" => Device {
                name: "titanxp".into(),
                origin: "profile".into(),
                compute_capability: (6, 1),
                multiprocessors: 30,
                shared_per_sm: kib(96),
                shared_per_block: kib(48),
                shared_per_block_optin: kib(48),
                shared_reserved_per_block: 0,
                registers_per_sm: 65536,
                max_registers_per_thread: 255,
                threads_per_sm: 2048,
                blocks_per_sm: 32,
                readonly_cache_per_sm: kib(48),
                unified_l1: false,
                boost_clock_mhz: 1582,
                fp32_lanes_per_sm: 128,
                memory_bandwidth_gbs: 547.6,
                model: PASCAL_FIT,
            },
            // A100 SXM4 80 GB (sm_80): 108 SMs, 192 KiB L1/shared per SM, up to 164 KiB shared.
            "a100" => Device {
                name: "a100".into(),
                origin: "profile".into(),
                compute_capability: (8, 0),
                multiprocessors: 108,
                shared_per_sm: kib(164),
                shared_per_block: kib(48),
                shared_per_block_optin: kib(163),
                shared_reserved_per_block: 1024,
                registers_per_sm: 65536,
                max_registers_per_thread: 255,
                threads_per_sm: 2048,
                blocks_per_sm: 32,
                readonly_cache_per_sm: kib(192),
                unified_l1: true,
                boost_clock_mhz: 1410,
                fp32_lanes_per_sm: 64,
                memory_bandwidth_gbs: 2039.0,
                model: UNMEASURED,
            },
            // H100 SXM5 80 GB (sm_90): 132 SMs, 256 KiB L1/shared per SM, up to 228 KiB shared.
            "h100" => Device {
                name: "h100".into(),
                origin: "profile".into(),
                compute_capability: (9, 0),
                multiprocessors: 132,
                shared_per_sm: kib(228),
                shared_per_block: kib(48),
                shared_per_block_optin: kib(227),
                shared_reserved_per_block: 1024,
                registers_per_sm: 65536,
                max_registers_per_thread: 255,
                threads_per_sm: 2048,
                blocks_per_sm: 32,
                readonly_cache_per_sm: kib(256),
                unified_l1: true,
                boost_clock_mhz: 1980,
                fp32_lanes_per_sm: 128,
                memory_bandwidth_gbs: 3350.0,
                model: HOPPER_FIT,
            },
            // H200 SXM 141 GB: the H100's chip with faster, larger memory.
            "h200" => Device { name: "h200".into(), memory_bandwidth_gbs: 4800.0, ..Device::profile("h100")? },
            _ => return None,
        };
        Some(d)
    }

    /// The NVRTC target for this device, e.g. `sm_90`.
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.compute_capability.0, self.compute_capability.1)
    }

    /// Peak FP32 instruction issue rate (one FMA counts once), in instructions per second.
    pub fn fp32_issue_rate(&self) -> f64 {
        self.multiprocessors as f64 * self.fp32_lanes_per_sm as f64 * self.boost_clock_mhz as f64 * 1e6
    }

    /// The profile whose model constants best describe a live device of this compute capability.
    pub fn closest_profile(cc: (u32, u32)) -> Device {
        let name = match cc.0 {
            0..=7 => "titanxp",
            8 => "a100",
            _ => "h100",
        };
        Device::profile(name).expect("profile exists")
    }
}
