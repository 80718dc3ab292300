//! The paper's performance models (section 3.3.2): occupancy and rounds
//! (eq. 1), and the birthday-collision latency of shared output copies
//! (eq. 2 to 5).

use serde::Serialize;

use crate::device::{Device, ModelConstants};

/// What a kernel asks of one multiprocessor per block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BlockNeeds {
    pub threads: u32,
    pub shared_bytes: u32,
    pub registers_per_thread: u32,
}

/// The resource that stops more blocks from being resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limiter {
    Threads,
    Blocks,
    SharedMemory,
    Registers,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Occupancy {
    pub blocks_per_sm: u32,
    /// alpha in eq. 1: threads resident on one multiprocessor.
    pub threads_per_sm: u32,
    pub limiter: Limiter,
}

/// Blocks that fit on one multiprocessor, or None when not even one does.
pub fn occupancy(dev: &Device, needs: BlockNeeds) -> Option<Occupancy> {
    if needs.threads == 0 || needs.threads > 1024 || needs.registers_per_thread > dev.max_registers_per_thread {
        return None;
    }
    if needs.shared_bytes > dev.shared_per_block_optin {
        return None;
    }
    // Registers are handed out per warp in units of 256.
    let warp_regs = (needs.registers_per_thread * 32).div_ceil(256) * 256;
    let block_regs = warp_regs * needs.threads.div_ceil(32);
    let shared = needs.shared_bytes + dev.shared_reserved_per_block;
    let mut limits = vec![
        (dev.threads_per_sm / needs.threads, Limiter::Threads),
        (dev.blocks_per_sm, Limiter::Blocks),
        (dev.registers_per_sm / block_regs.max(1), Limiter::Registers),
    ];
    if needs.shared_bytes > 0 {
        limits.push((dev.shared_per_sm / shared, Limiter::SharedMemory));
    }
    // Ties go to the first listed: threads, then blocks, then registers, then shared memory.
    let (blocks, limiter) =
        limits.into_iter().fold((u32::MAX, Limiter::Threads), |best, l| if l.0 < best.0 { l } else { best });
    (blocks > 0).then_some(Occupancy { blocks_per_sm: blocks, threads_per_sm: blocks * needs.threads, limiter })
}

/// R = ceil(T / (alpha * M_P)), eq. 1.
pub fn rounds(total_threads: u64, occ: Occupancy, dev: &Device) -> u64 {
    let per_round = occ.threads_per_sm as u64 * dev.multiprocessors as u64;
    total_threads.div_ceil(per_round.max(1)).max(1)
}

/// Probability that k lanes writing into `slots` output elements all miss each other (eq. 5).
pub fn no_collision(k: u32, slots: f64) -> f64 {
    let k = k as f64;
    (-k * (k - 1.0) / (2.0 * slots)).exp()
}

/// L(k) with k lanes of a warp sharing one output copy of `slots` elements (eq. 2, 3):
/// L(1) = C_L; L(k) = p_k C_L + (1 - p_k) L(k - 1) evaluated with C_L + C_LP.
pub fn latency(k: u32, slots: f64, c_l: f64, c_lp: f64) -> f64 {
    if k <= 1 {
        return c_l;
    }
    let p = no_collision(k, slots);
    p * c_l + (1.0 - p) * latency(k - 1, slots, c_l + c_lp, c_lp)
}

/// One row of the copy-count model: the cost of `copies` private outputs per block.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopyRow {
    pub copies: u32,
    /// Lanes of a warp that share one copy.
    pub k: u32,
    pub shared_bytes: u32,
    pub occupancy: Option<Occupancy>,
    pub rounds: Option<u64>,
    /// L(k) in units of C_L.
    pub latency: f64,
    /// R x L, in units of C_L; None where the copies do not fit.
    pub cost: Option<f64>,
}

/// The inputs of the copy-count choice for a privatized histogram.
#[derive(Debug, Clone, Copy)]
pub struct CopyProblem {
    /// H_S: elements in one output copy.
    pub slots: u32,
    pub bytes_per_slot: u32,
    /// Shared memory the block needs besides the output copies (input tile, scratch).
    pub other_shared_bytes: u32,
    pub block_size: u32,
    pub registers_per_thread: u32,
    pub total_threads: u64,
}

pub const COPY_CHOICES: [u32; 6] = [1, 2, 4, 8, 16, 32];

pub fn copy_table(dev: &Device, p: CopyProblem, m: ModelConstants) -> Vec<CopyRow> {
    COPY_CHOICES
        .iter()
        .map(|&copies| {
            let k = 32 / copies;
            let shared_bytes = copies * p.slots * p.bytes_per_slot + p.other_shared_bytes;
            let occ = occupancy(
                dev,
                BlockNeeds { threads: p.block_size, shared_bytes, registers_per_thread: p.registers_per_thread },
            );
            let rounds = occ.map(|o| rounds(p.total_threads, o, dev));
            let latency = latency(k, p.slots as f64, m.c_l, m.c_lp) / m.c_l;
            CopyRow {
                copies,
                k,
                shared_bytes,
                occupancy: occ,
                rounds,
                latency,
                cost: rounds.map(|r| r as f64 * latency),
            }
        })
        .collect()
}

/// The row of least cost; ties go to fewer copies (less shared memory for the same time).
pub fn best_copies(rows: &[CopyRow]) -> Option<&CopyRow> {
    rows.iter().filter(|r| r.cost.is_some()).fold(None, |best: Option<&CopyRow>, r| match best {
        Some(b) if b.cost.unwrap() <= r.cost.unwrap() * (1.0 + 1e-12) => Some(b),
        _ => Some(r),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_lane_per_copy_never_waits() {
        assert_eq!(latency(1, 10.0, 1.0, 0.6), 1.0);
    }

    #[test]
    fn collision_probability_follows_the_birthday_bound() {
        // 23 people, 365 days: about half see a shared birthday.
        let p = no_collision(23, 365.0);
        assert!((p - 0.5).abs() < 0.03, "{p}");
        assert!((no_collision(2, 100.0) - (-0.01f64).exp()).abs() < 1e-12);
    }

    #[test]
    fn latency_grows_with_sharing_and_shrinks_with_output_size() {
        let m = (1.0, 0.6);
        for slots in [1.0, 10.0, 100.0, 1000.0] {
            let mut last = 0.0;
            for k in [1, 2, 4, 8, 16, 32] {
                let l = latency(k, slots, m.0, m.1);
                assert!(l >= last, "k={k} slots={slots}");
                last = l;
            }
        }
        assert!(latency(32, 10.0, 1.0, 0.6) > latency(32, 1000.0, 1.0, 0.6));
        // Eq. 5 approximates the product of eq. 4 well once slots >> k.
        let exact: f64 = (1..8).map(|m| (1000.0 - m as f64) / 1000.0).product();
        assert!((no_collision(8, 1000.0) - exact).abs() < 1e-3);
    }

    #[test]
    fn occupancy_is_limited_by_the_scarcest_resource() {
        let dev = Device::profile("titanxp").unwrap();
        let o = occupancy(&dev, BlockNeeds { threads: 64, shared_bytes: 0, registers_per_thread: 32 }).unwrap();
        assert_eq!((o.blocks_per_sm, o.threads_per_sm, o.limiter), (32, 2048, Limiter::Threads));
        let o = occupancy(&dev, BlockNeeds { threads: 64, shared_bytes: 24 * 1024, registers_per_thread: 32 }).unwrap();
        assert_eq!((o.blocks_per_sm, o.limiter), (4, Limiter::SharedMemory));
        let o = occupancy(&dev, BlockNeeds { threads: 256, shared_bytes: 0, registers_per_thread: 128 }).unwrap();
        assert_eq!((o.blocks_per_sm, o.limiter), (2, Limiter::Registers));
        assert!(
            occupancy(&dev, BlockNeeds { threads: 64, shared_bytes: 49 * 1024, registers_per_thread: 32 }).is_none()
        );
    }

    #[test]
    fn rounds_follow_equation_one() {
        let dev = Device::profile("titanxp").unwrap();
        let occ = Occupancy { blocks_per_sm: 32, threads_per_sm: 2048, limiter: Limiter::Threads };
        assert_eq!(rounds(512_000, occ, &dev), 512_000u64.div_ceil(2048 * 30));
    }
}
