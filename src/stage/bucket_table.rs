//! A bucket from the bits of an f32 (issue 51): the table that finds a pair's
//! bucket among log-spaced edges at about the cost of a linear bucket.
//!
//! The buckets of a non-negative f32 `x` (a squared distance tested on keys,
//! or a value such as a log-spaced axis's distance) are given by sorted
//! thresholds T_0 < T_1 < ... < T_n: x's class is the number of thresholds it
//! reaches (x >= T_j), bucket class - 1, none below T_0 or from T_n on (or for
//! NaN). For positive floats the order of the numbers is the order of their
//! bits, so u = bits(x) - bits(T_0) orders x from T_0 on, and its top bits
//! (those above `shift`) name a cell of 2^shift bit patterns; the table is
//! chosen so that no cell holds more than one threshold. A cell's entry holds
//! the class at its first pattern and where in the cell its threshold lies,
//! packed so that
//!
//! ```text
//! u     = min(bits - bits(T_0), CELLS << SHIFT)      (below T_0 wraps past the cells)
//! slot  = (table[u >> SHIFT] + u) >> SHIFT
//! ```
//!
//! is the bucket exactly: entry = ((class - 1) << SHIFT) + c - (cell << SHIFT)
//! (mod 2^32), where c = 2^SHIFT - (bits(T) - first) for a threshold T
//! inside the cell (0 where none is), so that entry + u = ((class - 1) <<
//! SHIFT) + c + (u's low bits), which carries into the class exactly where
//! x's bits reach T's. Cells start at T_0, so every class in them is 1 or
//! more. Everything outside the cells (below T_0, past T_n's cell, negative:
//! a sign bit lies past every positive pattern; infinite or NaN past the
//! finite ones) is clamped to the last entry, (SLOTS - CELLS) << SHIFT, whose
//! sum is SLOTS << SHIFT: no bucket; so are the keys from T_n on within the
//! cells (class n + 1). On the GPU: an add-and-min (VIADDMNMX), a shift and a
//! multiply-add for the address, one shared load (conflict-free: each lane
//! reads its own copy of the table), an add and a shift; no branch, no vote.
//!
//! The thresholds are exact: a value's are its f32 edges themselves (bucket k
//! holds E_k <= v < E_k+1); a key's are the smallest keys whose value reaches
//! each edge, found here with the map's arithmetic (the built-ins' `root`,
//! IEEE `sqrtf` both here and in the kernel) and checked by every kernel when
//! it starts with its own (`contribution/histogram_table_key.cu`).

use serde::Serialize;

/// The most shared memory a table takes per block: lanes read copies of it,
/// as many (up to 32, a power of two) as fit.
pub const TABLE_BYTES: u32 = 8 * 1024;
/// The most cells a table may have (one copy of it fills `TABLE_BYTES`).
pub const MAX_CELLS: u32 = TABLE_BYTES / 4 - 1;

/// A table of cells over the bits of an f32 that gives each its bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketTable {
    /// Low bits of a cell: 23 less the mantissa bits that name it.
    pub shift: u32,
    /// Where the cells start: the bits of T_0.
    pub origin: u32,
    /// Cells from T_0's to T_n's; entry `cells` is for everything outside.
    pub cells: u32,
    /// Copies of the table in shared memory: lane l reads copy l % copies.
    pub copies: u32,
    /// `cells + 1` entries, the last SLOTS << shift.
    pub entries: Vec<u32>,
    /// The thresholds the table was made from (the key or value edges).
    pub thresholds: Vec<f32>,
}

impl BucketTable {
    /// The table for `thresholds`, with the fewest cells that hold one
    /// threshold at most each; None where there is none: thresholds not
    /// strictly increasing, the first not above 0, the last not finite, or
    /// more than `MAX_CELLS` cells needed.
    pub fn new(thresholds: &[f32]) -> Option<BucketTable> {
        let n = thresholds.len().checked_sub(1)?;
        let slots = n as u64;
        let bits: Vec<u32> = thresholds.iter().map(|t| t.to_bits()).collect();
        let positive_finite = |b: u32| b > 0 && b < 0x7f80_0000;
        if n == 0 || !bits.iter().all(|&b| positive_finite(b)) || bits.windows(2).any(|w| w[0] >= w[1]) {
            return None;
        }
        for shift in (0..=23u32).rev() {
            // The packed class must not overflow: (SLOTS << shift) plus a carry.
            if (slots + 2) << shift > 1u64 << 32 {
                continue;
            }
            let cells = ((bits[n] - bits[0]) >> shift) + 1;
            if cells > MAX_CELLS {
                break; // finer cells only need more
            }
            if let Some(entries) = entries(&bits, shift, cells) {
                let copies = (1..=5).map(|p| 1u32 << p).rev().find(|c| (cells + 1) * c * 4 <= TABLE_BYTES).unwrap_or(1);
                return Some(BucketTable {
                    shift,
                    origin: bits[0],
                    cells,
                    copies,
                    entries,
                    thresholds: thresholds.to_vec(),
                });
            }
        }
        None
    }

    /// Buckets: one fewer than thresholds.
    pub fn slots(&self) -> u32 {
        self.thresholds.len() as u32 - 1
    }

    /// The bucket of `x` as the kernel finds it (SLOTS: none).
    pub fn slot(&self, x: f32) -> u32 {
        let u = x.to_bits().wrapping_sub(self.origin).min(self.cells << self.shift);
        self.entries[(u >> self.shift) as usize].wrapping_add(u) >> self.shift
    }

    /// The bucket of `x` by definition: the thresholds it reaches, less one.
    pub fn slot_by_thresholds(&self, x: f32) -> u32 {
        let class = self.thresholds.iter().filter(|&&t| x >= t).count() as u32;
        if class == 0 || class > self.slots() { self.slots() } else { class - 1 }
    }

    /// Shared memory per block.
    pub fn shared_bytes(&self) -> u32 {
        (self.cells + 1) * self.copies * 4
    }

    /// What the templates render it with.
    pub fn context(&self) -> serde_json::Value {
        serde_json::json!({
            "shift": self.shift,
            "origin": format!("{:#010x}u", self.origin),
            "cells": self.cells,
            "copies": self.copies,
            "entries": self.entries.iter().map(|e| format!("{e:#010x}u")).collect::<Vec<_>>(),
            "thresholds": self.thresholds.iter().map(|&t| crate::spec::Value::F32(t).c_literal()).collect::<Vec<_>>(),
        })
    }
}

/// The packed entries of `cells` cells of 2^`shift` patterns from T_0's, or
/// None where a cell holds two thresholds.
fn entries(bits: &[u32], shift: u32, cells: u32) -> Option<Vec<u32>> {
    let slots = bits.len() as u32 - 1;
    let width = 1u64 << shift;
    let mut out = Vec::with_capacity(cells as usize + 1);
    let mut reached = 0usize; // thresholds at or below the cell's first bit pattern
    for cell in 0..cells {
        let first = bits[0] as u64 + ((cell as u64) << shift);
        while reached < bits.len() && bits[reached] as u64 <= first {
            reached += 1;
        }
        let inside = bits[reached..].iter().take_while(|&&b| (b as u64) < first + width).count();
        let c = match inside {
            0 => 0,
            1 => width - (bits[reached] as u64 - first),
            _ => return None,
        };
        // (class - 1) << shift, class 1 or more from T_0 on, less the cell's own offset.
        let entry = (((reached as u64 - 1) << shift) + c).wrapping_sub((cell as u64) << shift);
        out.push(entry as u32);
    }
    out.push((slots.wrapping_sub(cells)) << shift);
    Some(out)
}

/// The built-ins' key map, `root(k) = sqrtf(k > 0 ? k : 0)`, with IEEE sqrt
/// as the kernels compute it (`problems/distance.cu`, `problems/rdf.cu`).
pub fn root(k: f32) -> f32 {
    (if k > 0.0 { k } else { 0.0 }).sqrt()
}

/// The keys of f32s in order: the rank of a non-NaN key (`keys.cu`'s key_rank).
fn key_rank(k: f32) -> u32 {
    let u = k.to_bits();
    if u & 0x8000_0000 != 0 { !u } else { u | 0x8000_0000 }
}

fn key_of_rank(r: u32) -> f32 {
    f32::from_bits(if r & 0x8000_0000 != 0 { r & 0x7fff_ffff } else { !r })
}

/// The smallest key whose `map` reaches each of `edges` (map(k) >= edge), by
/// bisection over the keys in order, as the kernels' `smallest_key` finds
/// them; None where no key reaches an edge or every key does (no threshold).
pub fn key_thresholds(edges: &[f32], map: impl Fn(f32) -> f32) -> Option<Vec<f32>> {
    edges
        .iter()
        .map(|&e| {
            let passes = |r: u32| map(key_of_rank(r)) >= e;
            let (mut lo, mut hi) = (key_rank(f32::NEG_INFINITY), key_rank(f32::INFINITY));
            if !passes(hi) || passes(lo) {
                return None;
            }
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if passes(mid) { hi = mid } else { lo = mid }
            }
            Some(key_of_rank(hi))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    fn log_edges(lo: f64, hi: f64, bins: usize) -> Vec<f32> {
        (0..=bins)
            .map(|k| match k {
                0 => lo as f32,
                k if k == bins => hi as f32,
                k => (lo * ((hi / lo).ln() * k as f64 / bins as f64).exp()) as f32,
            })
            .collect()
    }

    /// Every bit pattern near each threshold and each cell's ends, the
    /// landmarks, and a stride through all 2^32.
    fn check(table: &BucketTable) {
        let mut probes: Vec<u32> = (0..1u64 << 32).step_by(65_537).map(|b| b as u32).collect();
        for &t in &table.thresholds {
            let b = t.to_bits();
            probes.extend(b.saturating_sub(300)..=b.saturating_add(300));
        }
        for cell in 0..=table.cells + 1 {
            let first = table.origin.wrapping_add(cell << table.shift);
            probes.extend(first.wrapping_sub(3)..=first.saturating_add(3));
        }
        probes.extend([0, 0x8000_0000, 0x7f80_0000, 0xff80_0000, 0x7fc0_0000, 0xffc0_0000, 1, 0x8000_0001, u32::MAX]);
        for b in probes {
            let x = f32::from_bits(b);
            assert_eq!(table.slot(x), table.slot_by_thresholds(x), "bits {b:#010x} ({x:e}) in {table:?}");
        }
    }

    #[test]
    fn log_edges_and_their_keys_get_a_table_with_one_threshold_a_cell() {
        for (lo, hi, bins) in
            [(1e-3, 0.5, 20), (0.01, 1.7320508, 37), (1e-5, 100.0, 200), (0.1, 0.2, 1), (1.0, 1e6, 300)]
        {
            let edges = log_edges(lo, hi, bins);
            let values = BucketTable::new(&edges).expect("a table of values");
            check(&values);
            let keys = key_thresholds(&edges, root).expect("keys");
            let table = BucketTable::new(&keys).expect("a table of keys");
            check(&table);
            // Every key's bucket from the table is its value's.
            let mut rng = rand::rngs::StdRng::seed_from_u64(51);
            for _ in 0..200_000 {
                let k = f32::from_bits(rng.random::<u32>());
                assert_eq!(table.slot(k), values.slot_by_thresholds(root(k)), "key {k:e}");
            }
            for &t in &keys {
                for d in -40i64..=40 {
                    let k = f32::from_bits((t.to_bits() as i64 + d) as u32);
                    assert_eq!(table.slot(k), values.slot_by_thresholds(root(k)), "key {k:e}");
                }
            }
        }
    }

    #[test]
    fn twenty_log_buckets_over_three_decades_take_few_cells() {
        let keys = key_thresholds(&log_edges(1e-3, 0.5, 20), root).unwrap();
        let table = BucketTable::new(&keys).unwrap();
        assert!(table.cells <= 64, "{} cells", table.cells);
        assert_eq!(table.copies, 32);
        assert!(table.shared_bytes() <= TABLE_BYTES);
    }

    #[test]
    fn tables_refuse_what_they_cannot_hold() {
        assert_eq!(BucketTable::new(&[0.0, 1.0]), None, "a first threshold of 0");
        assert_eq!(BucketTable::new(&[1.0, 1.0, 2.0]), None, "an empty bucket");
        assert_eq!(BucketTable::new(&[1.0, f32::INFINITY]), None, "an infinite threshold");
        assert_eq!(BucketTable::new(&[1.0]), None, "no bucket");
        // 2^20 buckets a float apart: more cells than a table holds.
        let dense: Vec<f32> = (0..5000u32).map(|i| f32::from_bits(0x3f80_0000 + i)).collect();
        assert_eq!(BucketTable::new(&dense), None);
        // Thresholds a few floats apart still get a table of fine cells.
        let close: Vec<f32> = (0..8u32).map(|i| f32::from_bits(0x3f80_0000 + 5 * i)).collect();
        check(&BucketTable::new(&close).unwrap());
    }

    #[test]
    fn many_buckets_narrow_the_cells_and_the_copies() {
        for bins in [100, 500] {
            let edges = log_edges(1e-4, 1.0, bins);
            let table = BucketTable::new(&edges).unwrap();
            check(&table);
            assert!(table.shared_bytes() <= TABLE_BYTES);
        }
    }
}
