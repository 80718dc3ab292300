//! The cell hierarchy (DM-SDH, Tu, Chen, Pandit, ICDE 2009): a k-d tree of
//! cells over the points, whose pairs of cells are resolved top down. A pair
//! of cells every one of whose point pairs lands in one class (below the
//! first bucket, bucket b, past the last) under the spec's own f32
//! arithmetic adds n_a x n_b (n (n - 1) / 2 for a cell with itself) to that
//! bucket at once; a straddling pair splits; pairs of leaves left over
//! become the grid's units ([`crate::index::Unit`]: own points of a leaf,
//! ranges of the other leaves' sorted points), which the backends' existing
//! grid walks count one pair at a time.
//!
//! Exactness (docs/planner.md, "The cell hierarchy"): the f32 key of any pair
//! of a cell pair lies within [s_min (1 - REL) - ABS, s_max (1 + REL) + ABS],
//! s_min and s_max the real least and greatest squared distance between the
//! two cells' bounding boxes; the class is non-decreasing in the key, so the
//! pair resolves when the classes of that interval's two ends (rounded out to
//! f32) agree.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use crate::data::{Column, Inputs, PointSet};
use crate::index::{Grid, IndexKind, Sorted, Summary, Unit};
use crate::spec::{Output, Params, Problem, Scalar, Spacing};
use crate::stage::contribution::{histogram_scale, log_edges};
use crate::stage::visit::Visit;

/// Most coordinates a cell's box bounds.
const MAX_DIMS: usize = 3;
/// u = 2^-24, the unit roundoff of f32.
const U: f64 = 1.0 / 16_777_216.0;
/// Absolute slack of a key's bound: covers results flushed to zero (a GPU's
/// FTZ: each operation then errs by under 2^-126 absolutely; inputs flushed
/// move a separation by under 2^-125) with a wide margin. Only cells whose
/// separations lie within 2^-50 of each other's feel it.
const ABS: f64 = 1.0 / (1u128 << 100) as f64;

/// The distance the spec's value is, where twobs can bound it over two boxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// `problems/distance.cu`: sqrtf of the f32 sum of the squared f32
    /// differences, fused (`fmaf`) after the first.
    Euclidean,
}

impl Metric {
    /// The metric of `problem`'s value, or why it has none twobs can bound.
    pub fn of(problem: &Problem) -> Result<Metric, String> {
        let f = &problem.function;
        let euclid = crate::problems::built_in_file("distance.cu");
        let key = f.key.as_ref();
        if euclid == Some(f.source.as_str())
            && f.name == "distance"
            && key.is_some_and(|k| k.key == "squared_distance" && k.map == "root")
        {
            return Ok(Metric::Euclidean);
        }
        Err(format!(
            "`{}` is not the built-in Euclidean distance (problems/distance.cu), whose rounding the hierarchy bounds",
            f.name
        ))
    }

    /// The relative error of a key over `dims` coordinates: each difference
    /// rounds once, (1 + u)^2 on its square; the square and at most dims - 1
    /// fused adds of non-negative terms round once each, (1 + u)^dims; so the
    /// key is within (1 + u)^(dims + 2) - 1 < (dims + 3) u of the real sum
    /// (for dims <= 3), and f64's own error in the bounds (2^-50) is added.
    fn relative(self, dims: usize) -> f64 {
        (dims as f64 + 3.0) * U + 1.0 / (1u64 << 50) as f64
    }
}

/// How a value is classed: 0 below the first bucket (or NaN), 1 + b in
/// bucket b, slots + 1 past the last; non-decreasing in the key, with the
/// built-ins' map `root(k) = sqrtf(k > 0 ? k : 0)` and the bucket
/// arithmetic of `templates/contribution/bucket.cu` in f32.
#[derive(Debug, Clone)]
enum Buckets {
    Linear { lo: f32, scale: f32, slots: u32 },
    Log { edges: Vec<f32> },
}

impl Buckets {
    fn of(problem: &Problem, params: &Params) -> Result<Buckets, String> {
        let Output::Histogram { spacing, weight, .. } = &problem.output else {
            return Err(format!("a {} output: the hierarchy counts histograms of one value", problem.output.kind()));
        };
        if weight.is_some() || problem.input.point_weights {
            return Err("weighted pairs: the hierarchy adds counts only".into());
        }
        // A cell pair adds n_a x n_b at once, the pairs of one molecule among them.
        if let Some(same) = &problem.exclude {
            return Err(format!("pairs of the same `{same}` are excluded: the hierarchy counts whole cell pairs"));
        }
        if problem.function.returns != Scalar::F32 {
            return Err("the value is not f32, whose rounding the hierarchy bounds".into());
        }
        Ok(match spacing {
            Spacing::Log => {
                Buckets::Log { edges: log_edges(problem, params).iter().map(|v| v.as_f64() as f32).collect() }
            }
            _ => {
                let (lo, scale) = histogram_scale(problem, params).expect("a histogram");
                let Output::Histogram { bins, .. } = &problem.output else { unreachable!() };
                Buckets::Linear {
                    lo: lo.as_f64() as f32,
                    scale: scale.as_f64() as f32,
                    slots: params.eval(bins).as_f64() as u32,
                }
            }
        })
    }

    fn slots(&self) -> u32 {
        match self {
            Buckets::Linear { slots, .. } => *slots,
            Buckets::Log { edges } => edges.len() as u32 - 1,
        }
    }

    /// The class of f32 key `k`, with the spec's map and bucket arithmetic.
    #[allow(clippy::neg_cmp_op_on_partial_ord, reason = "a NaN value falls below, as in bucket.cu")]
    fn class(&self, k: f32) -> u32 {
        let v = if k > 0.0 { k.sqrt() } else { 0.0 };
        match self {
            Buckets::Linear { lo, scale, slots } => {
                let x = (v - lo) * scale;
                if !(v >= *lo) {
                    0
                } else if x < *slots as f32 {
                    x as u32 + 1
                } else {
                    slots + 1
                }
            }
            Buckets::Log { edges } => {
                let n = edges.len() - 1;
                if !(v >= edges[0]) {
                    0
                } else if v >= edges[n] {
                    n as u32 + 1
                } else {
                    // The bucket b with edges[b] <= v < edges[b + 1]: the inner edges v reaches.
                    edges[1..n].partition_point(|&e| v >= e) as u32 + 1
                }
            }
        }
    }
}

/// The classes of keys as thresholds: the bits of the least non-negative
/// f32 key of each class past the first (u32::MAX where no key reaches it).
/// A non-negative f32's bits order as its value, and the class never
/// decreases in the key, so a key's class is the number of thresholds at
/// or below its bits: [`Buckets::class`] exactly, without a square root or
/// the edges' arithmetic.
struct Firsts(Vec<u32>, Vec<u32>);

/// [`Firsts`]' table of classes is indexed by a key's bits shifted by this
/// (the exponent and 7 bits of the fraction: 32641 entries, 128 KiB).
const FIRSTS_SHIFT: u32 = 16;

impl Firsts {
    /// The least key of each class, by bisection over the f32 bit patterns of 0 to infinity.
    fn of(buckets: &Buckets) -> Firsts {
        let firsts = (1..=buckets.slots() + 1)
            .map(|c| {
                if buckets.class(f32::from_bits(INF)) < c {
                    return u32::MAX;
                }
                // class(lo) < c <= class(hi), or lo = 0 where key 0 is already past c.
                let (mut lo, mut hi) = (0u32, INF);
                if buckets.class(0.0) >= c {
                    return 0;
                }
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if buckets.class(f32::from_bits(mid)) >= c { hi = mid } else { lo = mid }
                }
                hi
            })
            .collect::<Vec<u32>>();
        // The class of the least key of each span of keys of equal bits past the shift.
        let table =
            (0..=INF >> FIRSTS_SHIFT).map(|i| firsts.partition_point(|&t| t <= i << FIRSTS_SHIFT) as u32).collect();
        Firsts(firsts, table)
    }

    /// The class of the non-negative key `k`: its span's least key's, then
    /// past the thresholds within the span.
    fn class(&self, k: f32) -> u32 {
        let bits = if k > 0.0 { k.to_bits().min(INF) } else { 0 };
        let mut c = self.1[(bits >> FIRSTS_SHIFT) as usize];
        while self.0.get(c as usize).is_some_and(|&t| t <= bits) {
            c += 1;
        }
        c
    }

    /// Whether key `k`, of class `c`, and every greater key up to `hi` share it.
    fn same(&self, c: u32, hi: f32) -> bool {
        self.0.get(c as usize).is_none_or(|&t| hi.to_bits() < t)
    }
}

/// The bits of f32 infinity, the greatest key.
const INF: u32 = 0x7f80_0000;

/// The largest f32 at most `x` (x >= 0).
fn f32_down(x: f64) -> f32 {
    let f = x as f32;
    if f as f64 > x { f32::from_bits(f.to_bits() - 1) } else { f }
}

/// The least f32 at least `x` (x >= 0; infinity past the largest).
fn f32_up(x: f64) -> f32 {
    let f = x as f32;
    if (f as f64) < x { f32::from_bits(f.to_bits() + 1) } else { f }
}

/// A cell: sorted points [lo, hi), their bounding box, and its two halves.
#[derive(Debug, Clone, Copy)]
struct Node {
    lo: u32,
    hi: u32,
    min: [f32; MAX_DIMS],
    max: [f32; MAX_DIMS],
    /// Index of the first half (the second follows its subtree); 0 for a leaf.
    left: u32,
    right: u32,
}

impl Node {
    fn len(&self) -> u64 {
        (self.hi - self.lo) as u64
    }
    fn is_leaf(&self) -> bool {
        self.left == 0
    }
    /// Whether this cell's box has at least the other's diagonal: the wider
    /// of two cells is split, which narrows their pair's range of
    /// separations the most. Measured on 200k clustered points (20 log
    /// buckets): the same leaf pairs as splitting the cell of more points,
    /// and 4% fewer cell pairs (13.37M against 13.94M).
    fn wider_than(&self, other: &Node, dims: usize) -> bool {
        let diagonal = |n: &Node| (0..dims).map(|d| ((n.max[d] - n.min[d]) as f64).powi(2)).sum::<f64>();
        diagonal(self) >= diagonal(other)
    }
}

/// A set in the tree's order (its points with their rows), with its cells
/// (the root first).
struct Tree {
    entries: Vec<Entry>,
    nodes: Vec<Node>,
}

/// A point of a tree's working copy: its coordinates and its row in the set.
/// The tree reorders these (16 bytes each, contiguous) rather than an index
/// into the points, so that splitting and bounding a cell reads memory in order.
#[derive(Debug, Clone, Copy)]
struct Entry {
    p: [f32; MAX_DIMS],
    row: u32,
}

/// The bounding box of `entries`: f32 `min`/`max` folds (a NaN coordinate is
/// passed over), in parallel for large cells.
fn bounds(entries: &[Entry], dims: usize) -> ([f32; MAX_DIMS], [f32; MAX_DIMS]) {
    let fold = |entries: &[Entry]| {
        let (mut min, mut max) = ([f32::INFINITY; MAX_DIMS], [f32::NEG_INFINITY; MAX_DIMS]);
        for e in entries {
            for d in 0..dims {
                min[d] = min[d].min(e.p[d]);
                max[d] = max[d].max(e.p[d]);
            }
        }
        (min, max)
    };
    let (mut min, mut max) = if entries.len() > PARALLEL_CELL {
        entries.par_chunks(PARALLEL_CELL / 4).map(fold).reduce(
            || ([f32::INFINITY; MAX_DIMS], [f32::NEG_INFINITY; MAX_DIMS]),
            |(a, b), (c, d)| (std::array::from_fn(|k| a[k].min(c[k])), std::array::from_fn(|k| b[k].max(d[k]))),
        )
    } else {
        fold(entries)
    };
    for d in dims..MAX_DIMS {
        (min[d], max[d]) = (0.0, 0.0);
    }
    (min, max)
}

/// Cells of more points than this are bounded on every core, and their two
/// halves built side by side.
const PARALLEL_CELL: usize = 1 << 15;

/// The number of cells of a tree of `n` points with leaves of at most `leaf`:
/// 1 for a leaf, else the cell and its halves' (n / 2 and the rest).
fn cells_of(n: usize, leaf: usize, memo: &mut std::collections::HashMap<usize, usize>) -> usize {
    if n <= leaf {
        return 1;
    }
    if let Some(&c) = memo.get(&n) {
        return c;
    }
    let c = 1 + cells_of(n / 2, leaf, memo) + cells_of(n - n / 2, leaf, memo);
    memo.insert(n, c);
    c
}

/// The k-d tree of `entries` (reordered in place into the tree's order):
/// each cell split at the median of its widest side until at most `leaf`
/// points are left. The cells are written in place, a cell before its first
/// half's subtree and that before the second's; halves of more than
/// [`PARALLEL_CELL`] points are built on every core.
fn tree(mut entries: Vec<Entry>, dims: usize, leaf: usize) -> Tree {
    struct Build<'a> {
        dims: usize,
        leaf: usize,
        /// Cells of the subtree of n points, for every n > leaf met.
        cells: &'a std::collections::HashMap<usize, usize>,
    }
    impl Build<'_> {
        /// The subtree of `entries`, whose first point is the set's `lo`-th in
        /// the tree's order, into `out` (its cells), the first at index `at`.
        fn cell(&self, entries: &mut [Entry], lo: u32, out: &mut [Node], at: u32) {
            let (min, max) = bounds(entries, self.dims);
            let hi = lo + entries.len() as u32;
            if entries.len() <= self.leaf {
                out[0] = Node { lo, hi, min, max, left: 0, right: 0 };
                return;
            }
            let axis = (0..self.dims).max_by(|&a, &b| (max[a] - min[a]).total_cmp(&(max[b] - min[b]))).unwrap_or(0);
            let mid = entries.len() / 2;
            entries.select_nth_unstable_by(mid, |a, b| a.p[axis].total_cmp(&b.p[axis]));
            let left_cells = if mid <= self.leaf { 1 } else { self.cells[&mid] };
            let right_at = at + 1 + left_cells as u32;
            out[0] = Node { lo, hi, min, max, left: at + 1, right: right_at };
            let (l, r) = entries.split_at_mut(mid);
            let (lout, rout) = out[1..].split_at_mut(left_cells);
            if l.len() > PARALLEL_CELL {
                rayon::join(|| self.cell(l, lo, lout, at + 1), || self.cell(r, lo + mid as u32, rout, right_at));
            } else {
                self.cell(l, lo, lout, at + 1);
                self.cell(r, lo + mid as u32, rout, right_at);
            }
        }
    }
    let mut memo = std::collections::HashMap::new();
    let n = cells_of(entries.len(), leaf, &mut memo);
    let mut nodes = vec![Node { lo: 0, hi: 0, min: [0.0; MAX_DIMS], max: [0.0; MAX_DIMS], left: 0, right: 0 }; n];
    Build { dims, leaf, cells: &memo }.cell(&mut entries, 0, &mut nodes, 0);
    Tree { entries, nodes }
}

/// What resolving found: counts per class, pairs resolved, leaf pairs left.
#[derive(Default)]
struct Found {
    classes: Vec<u64>,
    node_pairs: u64,
    /// (own leaf, other leaf): for one set, a leaf with itself or an unordered pair once.
    leaves: Vec<(u32, u32)>,
    /// Leaf pairs' point pairs not yet added to [`Resolver::left`].
    unsummed: u64,
}

/// A task adds its leaf pairs' point pairs to the run's count (shared by
/// every core) once this many have gathered, and at its end.
const SUM_EVERY: u64 = 1 << 24;

/// The resolver over two trees (one tree twice for one set).
struct Resolver<'a> {
    a: &'a Tree,
    b: &'a Tree,
    one_set: bool,
    /// Own cells (the units' own points) split down to this many points,
    /// their partners to the trees' leaves.
    own_leaf: u64,
    dims: usize,
    rel: f64,
    classes: &'a Firsts,
    /// Pairs left to the leaves so far, against the most worth resolving.
    left: AtomicU64,
    most_left: u64,
    gave_up: AtomicBool,
    /// A stop asked (Ctrl-C in Python) ends resolving as a bound does; the
    /// run that follows sees the same request at its first piece of work.
    watch: crate::stop::Watch,
}

impl Resolver<'_> {
    /// The one class of every pair of cells `p` (of A) and `q` (of B), if there is one.
    fn class(&self, p: &Node, q: &Node) -> Option<u32> {
        let (mut near, mut far) = (0f64, 0f64);
        for d in 0..self.dims {
            let (plo, phi, qlo, qhi) = (p.min[d] as f64, p.max[d] as f64, q.min[d] as f64, q.max[d] as f64);
            let gap = (qlo - phi).max(plo - qhi).max(0.0);
            let span = (phi - qlo).max(qhi - plo);
            near += gap * gap;
            far += span * span;
        }
        let lo = f32_down((near * (1.0 - self.rel) - ABS).max(0.0));
        let hi = f32_up(far * (1.0 + self.rel) + ABS);
        let c = self.classes.class(lo);
        self.classes.same(c, hi).then_some(c)
    }

    /// Resolves cells `p` of A and `q` of B (p == q: a cell with itself).
    fn pair(&self, p: u32, q: u32, out: &mut Found) {
        if self.gave_up.load(Ordering::Relaxed) {
            return;
        }
        out.node_pairs += 1;
        let (np, nq) = (self.a.nodes[p as usize], self.b.nodes[q as usize]);
        let same = self.one_set && p == q;
        let pairs = if same { np.len() * (np.len() - 1) / 2 } else { np.len() * nq.len() };
        if let Some(c) = self.class(&np, &nq) {
            out.classes[c as usize] += pairs;
            return;
        }
        if same {
            if !self.own_splits(&np) {
                return self.leaf(p, q, pairs, out);
            }
            self.pair(np.left, np.left, out);
            self.pair(np.right, np.right, out);
            return self.pair(np.left, np.right, out);
        }
        // Split the wider cell, where it has halves.
        match (self.own_splits(&np), !nq.is_leaf()) {
            (false, false) => self.leaf(p, q, pairs, out),
            (true, false) => self.split_p(np, q, out),
            (false, true) => self.split_q(p, nq, out),
            (true, true) if np.wider_than(&nq, self.dims) => self.split_p(np, q, out),
            (true, true) => self.split_q(p, nq, out),
        }
    }

    /// Whether an own cell (of A) splits: above the own leaves' size. Its
    /// partners (of B) split down to the tree's leaves.
    fn own_splits(&self, n: &Node) -> bool {
        !n.is_leaf() && n.len() > self.own_leaf
    }

    fn split_p(&self, np: Node, q: u32, out: &mut Found) {
        self.pair(np.left, q, out);
        self.pair(np.right, q, out);
    }

    fn split_q(&self, p: u32, nq: Node, out: &mut Found) {
        self.pair(p, nq.left, out);
        self.pair(p, nq.right, out);
    }

    fn leaf(&self, p: u32, q: u32, pairs: u64, out: &mut Found) {
        out.leaves.push((p, q));
        out.unsummed += pairs;
        if out.unsummed >= SUM_EVERY {
            self.sum(out);
        }
        if self.watch.asked() {
            self.gave_up.store(true, Ordering::Relaxed);
        }
    }

    /// Adds a task's leaf pairs to the run's, and gives up past the most.
    fn sum(&self, out: &mut Found) {
        let pairs = std::mem::take(&mut out.unsummed);
        if self.left.fetch_add(pairs, Ordering::Relaxed) + pairs > self.most_left {
            self.gave_up.store(true, Ordering::Relaxed);
        }
    }

    /// Every pair of cells from the roots: the top of the recursion cut
    /// into tasks for every core (each a cell pair that neither resolves
    /// nor is a pair of leaves), then the tasks in parallel, merged in order.
    fn resolve(&self, slots: u32) -> Option<Found> {
        let mut found = Found { classes: vec![0; slots as usize + 2], ..Default::default() };
        let mut tasks = vec![(0u32, 0u32)];
        let want = 64 * rayon::current_num_threads();
        while tasks.len() < want {
            let mut next = Vec::with_capacity(4 * tasks.len());
            let mut split_any = false;
            for (p, q) in tasks {
                let (np, nq) = (self.a.nodes[p as usize], self.b.nodes[q as usize]);
                let same = self.one_set && p == q;
                let (ps, qs) = (self.own_splits(&np), !same && !nq.is_leaf());
                if !ps && !qs || self.class(&np, &nq).is_some() {
                    next.push((p, q));
                    continue;
                }
                split_any = true;
                found.node_pairs += 1;
                if same {
                    next.extend([(np.left, np.left), (np.right, np.right), (np.left, np.right)]);
                } else if ps && (!qs || np.wider_than(&nq, self.dims)) {
                    next.extend([(np.left, q), (np.right, q)]);
                } else {
                    next.extend([(p, nq.left), (p, nq.right)]);
                }
            }
            tasks = next;
            if !split_any {
                break;
            }
        }
        let parts: Vec<Found> = tasks
            .par_iter()
            .map(|&(p, q)| {
                let mut part = Found { classes: vec![0; slots as usize + 2], ..Default::default() };
                self.pair(p, q, &mut part);
                self.sum(&mut part);
                part
            })
            .collect();
        if self.gave_up.load(Ordering::Relaxed) {
            return None;
        }
        for part in parts {
            for (t, c) in found.classes.iter_mut().zip(&part.classes) {
                *t += c;
            }
            found.node_pairs += part.node_pairs;
            found.leaves.extend(part.leaves);
        }
        Some(found)
    }
}

/// Why the hierarchy applies to a run: its metric and buckets.
pub struct Applies {
    metric: Metric,
    buckets: Buckets,
    dims: usize,
}

/// Whether `auto` on the GPUs tries the hierarchy: for log-spaced buckets
/// alone. Measured on an H200 (docs/benchmarks.md, "Log-binned counts"), it beat every
/// pair on every log-binned case (1.4-3.4x) and lost on every linear one (SDH
/// of 4, 50 and 500 buckets: 2-3.5x slower; at 10M points the host's trees
/// took 56 s before giving up); its GPU costs are not fitted yet.
pub fn tried_by_gpu_auto(problem: &Problem) -> bool {
    matches!(problem.output, Output::Histogram { spacing: Spacing::Log, .. })
}

/// Whether the hierarchy can count `problem` on `inputs` exactly, or why not.
pub fn applies(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    visit: Visit,
    f64_mode: bool,
) -> Result<Applies, String> {
    let metric = Metric::of(problem)?;
    let buckets = Buckets::of(problem, params)?;
    if f64_mode {
        return Err("f64 arithmetic: the hierarchy bounds the spec's f32 rounding".into());
    }
    if visit == Visit::AllPairs {
        return Err("an ordered visit of one set".into());
    }
    assert_eq!(visit == Visit::Cross, inputs.b.is_some(), "a problem of two sets has two inputs");
    let dims = inputs.a.columns.len();
    let sets = std::iter::once(&inputs.a).chain(inputs.b.as_ref());
    if !(1..=MAX_DIMS).contains(&dims) || sets.clone().any(|s| s.columns.len() != dims) {
        return Err(format!("{dims} coordinates: the hierarchy bounds 1 to {MAX_DIMS}"));
    }
    if sets.flat_map(|s| &s.columns).any(|c| c.scalar() != Scalar::F32) {
        return Err("the coordinates are not f32".into());
    }
    Ok(Applies { metric, buckets, dims })
}

/// The hierarchy's result: the pairs it resolved, by bucket, and the leaf
/// pairs left, as a grid of units the backends walk.
pub struct Cells {
    /// Pairs resolved into each bucket (the histogram's slots).
    pub counts: Vec<u64>,
    /// Pairs resolved below the first bucket or past the last: counted nowhere.
    pub outside: u64,
    pub grid: Grid,
    pub summary: Summary,
    /// Cell pairs the resolver met.
    pub node_pairs: u64,
    pub leaves: u32,
    pub steps: Steps,
}

/// The host's steps of the hierarchy, in seconds (wall, every core).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Steps {
    /// Both sets' k-d trees.
    pub trees_s: f64,
    /// Resolving cell pairs from the roots down.
    pub resolve_s: f64,
    /// The leaf pairs left, as the grid's units.
    pub units_s: f64,
    /// The sets' copies in the trees' order.
    pub copies_s: f64,
}

/// Per-thread costs of the CPU backend, in nanoseconds (measured on this
/// project's 2-core development host, docs/planner.md): a pair of brute
/// force's rows, a pair of a grid unit, and a cell pair resolved.
#[derive(Debug, Clone, Copy)]
pub struct Costs {
    pub brute_pair: f64,
    pub unit_pair: f64,
    pub node_pair: f64,
    /// A point placed on one level of the tree.
    pub tree_point: f64,
}

impl Costs {
    /// The trees of `points` points with leaves of `leaf`, in nanoseconds of one thread.
    pub fn trees(&self, points: usize, leaf: u32) -> f64 {
        points as f64 * (points as f64 / leaf.max(2) as f64).log2().max(1.0) * self.tree_point
    }
}

/// The share of the alternative's cost that building the trees may take:
/// where they would cost more, the hierarchy is not tried.
const MOST_TREE_SHARE: f64 = 0.02;

/// The CPU backend's costs.
/// Brute force's rows ran 4.6 ns a pair (wall, 2 threads of a shared host)
/// and leaf pairs 9 to 12 ns in the same minute: a unit's pair costs twice
/// brute force's (short runs, a range per leaf).
pub const CPU_COSTS: Costs = Costs { brute_pair: 0.55, unit_pair: 1.1, node_pair: 60.0, tree_point: 8.0 };

/// The CPU's leaves. Measured (200k clustered points, 20 log buckets from
/// 0.001 to 0.5, 2 threads): the walk of the leaf pairs took 34, 37, 38 and
/// 52 s at leaves of 32, 64, 128 and 256 points (short runs cost more a
/// pair; large leaves resolve less), the resolver more the smaller they are.
pub const CPU_LEAF: u32 = 128;

/// The CPU's leaves for `points` points: [`CPU_LEAF`], or fewer for small
/// sets (at least 16), whose resolver costs little beside their pairs: a
/// leaf a 4096th of the points.
pub fn cpu_leaf(points: usize) -> u32 {
    ((points >> 12) as u32).clamp(16, CPU_LEAF)
}

/// `outcome` with the pairs the hierarchy resolved added to its buckets
/// (an MPI rank other than 0 keeps no totals, and adds none).
pub fn add_resolved(outcome: crate::outcome::Outcome, counts: Option<&[u64]>) -> crate::outcome::Outcome {
    use crate::outcome::{Outcome, Totals};
    match (outcome, counts) {
        (Outcome::Totals(Totals::Counts(mut t)), Some(c)) if t.len() == c.len() => {
            for (t, c) in t.iter_mut().zip(c) {
                *t += c;
            }
            Outcome::Totals(Totals::Counts(t))
        }
        (outcome, _) => outcome,
    }
}

/// The sizes of the hierarchy's leaves.
#[derive(Debug, Clone, Copy)]
pub struct Leaves {
    /// Most points of a unit's own cell (a GPU's grid block of B x R points).
    pub own: u32,
    /// Most points of a partner cell (the trees' leaves), at most `own`:
    /// smaller partners narrow a cell pair's separations (more of them
    /// resolve) for more cell pairs and shorter ranges.
    pub partner: u32,
}

impl Leaves {
    /// Own and partner cells alike of at most `leaf` points.
    pub fn of(leaf: u32) -> Leaves {
        Leaves { own: leaf, partner: leaf }
    }
}

/// The hierarchy of `inputs` with leaves of at most `leaves` points, where it
/// costs less than `best_other` (nanoseconds of one thread at `costs`); None
/// with the reason where it does not.
pub fn build(
    how: &Applies,
    inputs: &Inputs,
    visit: Visit,
    leaves: Leaves,
    costs: Costs,
    best_other: Option<(f64, String)>,
) -> Result<Cells, String> {
    let dims = how.dims;
    let all_points = inputs.a.len() + inputs.b.as_ref().map_or(0, PointSet::len);
    if let Some((ns, other)) = &best_other
        && costs.trees(all_points, leaves.partner) > MOST_TREE_SHARE * ns
    {
        return Err(format!(
            "the cell hierarchy's trees alone (about {:.3} s a thread) would cost more than {:.0}% of {other} ({:.3} s)",
            costs.trees(all_points, leaves.partner) * 1e-9,
            100.0 * MOST_TREE_SHARE,
            ns * 1e-9
        ));
    }
    let entries = |s: &PointSet| -> Vec<Entry> {
        let cols: Vec<&[f32]> = s
            .columns
            .iter()
            .map(|c| match c {
                Column::F32(v) => v.as_slice(),
                _ => unreachable!("applies() checked f32"),
            })
            .collect();
        (0..s.len() as u32)
            .into_par_iter()
            .with_min_len(1 << 14)
            .map(|row| {
                let mut p = [0f32; MAX_DIMS];
                for d in 0..dims {
                    p[d] = cols[d][row as usize];
                }
                Entry { p, row }
            })
            .collect()
    };
    let (leaf, own_leaf) = (leaves.partner.max(2) as usize, leaves.own.max(leaves.partner).max(2));
    let start = Instant::now();
    let ta = tree(entries(&inputs.a), dims, leaf);
    let tb = inputs.b.as_ref().map(|b| tree(entries(b), dims, leaf));
    let trees_s = start.elapsed().as_secs_f64();
    let one_set = visit == Visit::LowerTriangle;
    let (na, nb) = (inputs.a.len() as u64, inputs.other().len() as u64);
    let all = if one_set { na * na.saturating_sub(1) / 2 } else { na * nb };
    // Leaf pairs beyond which the alternative is cheaper: resolving gives up there.
    let most_left = match &best_other {
        Some((ns, _)) => (ns / costs.unit_pair) as u64,
        None => u64::MAX,
    };
    let resolver = Resolver {
        a: &ta,
        b: tb.as_ref().unwrap_or(&ta),
        one_set,
        own_leaf: own_leaf as u64,
        dims,
        rel: how.metric.relative(dims),
        classes: &Firsts::of(&how.buckets),
        left: AtomicU64::new(0),
        most_left,
        gave_up: AtomicBool::new(false),
        watch: crate::stop::Watch::start(),
    };
    let slots = how.buckets.slots();
    let start = Instant::now();
    let resolved = resolver.resolve(slots);
    let resolve_s = start.elapsed().as_secs_f64();
    let Some(found) = resolved else {
        if resolver.watch.asked() {
            return Err("a stop was asked while the cell hierarchy resolved".into());
        }
        let (_, other) = best_other.expect("only a bound gives up");
        return Err(format!(
            "the cell hierarchy would leave more than {most_left} of the {all} pairs to its leaves: {other} costs less"
        ));
    };
    let left: u64 = resolver.left.load(Ordering::Relaxed);
    let cost = found.node_pairs as f64 * costs.node_pair + left as f64 * costs.unit_pair;
    if let Some((ns, other)) = &best_other
        && cost >= *ns
    {
        return Err(format!(
            "the cell hierarchy would leave {left} of {all} pairs ({:.1}%) to its leaves after {} cell pairs, about {:.3} s a thread against {:.3} s: {other}",
            100.0 * left as f64 / all.max(1) as f64,
            found.node_pairs,
            cost * 1e-9,
            ns * 1e-9
        ));
    }
    let start = Instant::now();
    let (units, ranges) = units(&resolver, found.leaves);
    let units_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    // The sorted copies, from the trees' own: every column is a coordinate (applies()).
    let sorted = |set: &PointSet, t: &Tree| Sorted {
        set: PointSet {
            columns: (0..dims).map(|d| Column::F32(t.entries.par_iter().map(|e| e.p[d]).collect())).collect(),
            origin: format!("{} in cell order", set.origin),
            rows: None,
        },
        perm: t.entries.par_iter().map(|e| e.row).collect(),
        cell: Vec::new(),
        cell_start: vec![0, set.len() as u32],
    };
    let a = sorted(&inputs.a, &ta);
    let b = inputs.b.as_ref().zip(tb.as_ref()).map(|(s, t)| sorted(s, t));
    let copies_s = start.elapsed().as_secs_f64();
    let pairs: u128 = units.iter().map(|u| u.pairs as u128).sum();
    debug_assert_eq!(pairs, left as u128);
    let resolved: u64 = found.classes.iter().sum();
    let outside = found.classes[0] + found.classes[slots as usize + 1];
    let leaves = ta.nodes.iter().chain(tb.iter().flat_map(|t| &t.nodes)).filter(|n| n.is_leaf()).count() as u32;
    let why = format!(
        "cell hierarchy ({} leaves of at most {leaf} points{}): {} cell pairs resolved {resolved} of {all} pairs ({:.2}%, {outside} of them outside every bucket), {pairs} pairs left to the leaves; about {:.3} s a thread{}",
        leaves,
        if own_leaf as usize == leaf { String::new() } else { format!(", own cells of at most {own_leaf}") },
        found.node_pairs,
        100.0 * resolved as f64 / all.max(1) as f64,
        cost * 1e-9,
        match &best_other {
            Some((ns, other)) => format!(" against {:.3} s for {other}", ns * 1e-9),
            None => " (--index cells)".into(),
        }
    );
    let summary = Summary {
        index: IndexKind::Grid,
        why,
        cells: Some(leaves as u64),
        axes: None,
        pairs,
        all_pairs: all as u128,
        hierarchy: true,
    };
    Ok(Cells {
        counts: found.classes[1..=slots as usize].to_vec(),
        outside,
        grid: Grid { axes: Vec::new(), reach: 1, a, b, units, ranges, pairs },
        summary,
        node_pairs: found.node_pairs,
        leaves,
        steps: Steps { trees_s, resolve_s, units_s, copies_s },
    })
}

/// The units of the leaf pairs left: one per own leaf, its first range its
/// own points for one set (empty where the leaf's pairs with itself were
/// resolved: the walk meets points after i within it), then its partners'
/// points, neighbouring leaves merged into one range.
///
/// The leaf pairs are ordered by own leaf, its pair with itself first, then
/// by partner: a tree's leaves lie in its points' order in the order of
/// their indices (a cell's first half's subtree before its second's), so
/// the indices order them as their points do.
fn units(r: &Resolver, leaves: Vec<(u32, u32)>) -> (Vec<Unit>, Vec<[u32; 2]>) {
    // Counted into their own leaves' places, then each own leaf's sorted: (p != q, q).
    let mut start = vec![0usize; r.a.nodes.len() + 1];
    for &(p, _) in &leaves {
        start[p as usize + 1] += 1;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut at = start.clone();
    let mut keys = vec![0u64; leaves.len()];
    for &(p, q) in &leaves {
        keys[at[p as usize]] = ((p != q) as u64) << 32 | q as u64;
        at[p as usize] += 1;
    }
    drop(leaves);
    let mut groups = Vec::new();
    let mut rest = keys.as_mut_slice();
    for p in 0..r.a.nodes.len() {
        let (group, after) = rest.split_at_mut(start[p + 1] - start[p]);
        if !group.is_empty() {
            groups.push((p as u32, group));
        }
        rest = after;
    }
    groups.par_iter_mut().with_min_len(64).for_each(|(_, g)| g.sort_unstable());
    let by_own: Vec<(u32, u32)> = groups.iter().flat_map(|(p, g)| g.iter().map(|&k| (*p, k as u32))).collect();
    let (mut units, mut ranges) = (Vec::new(), Vec::<[u32; 2]>::new());
    for group in by_own.chunk_by(|x, y| x.0 == y.0) {
        let own = r.a.nodes[group[0].0 as usize];
        let first = ranges.len() as u32;
        let m = own.len();
        let mut pairs = 0u64;
        if r.one_set {
            let with_itself = group[0].0 == group[0].1;
            ranges.push([own.lo, if with_itself { own.hi } else { own.lo }]);
            if with_itself {
                pairs += m * (m - 1) / 2;
            }
        }
        let firsts = ranges.len();
        for &(_, q) in group.iter().filter(|(p, q)| !(r.one_set && p == q)) {
            let n = r.b.nodes[q as usize];
            pairs += m * n.len();
            let len = ranges.len();
            match ranges.last_mut() {
                Some(last) if len > firsts && last[1] == n.lo => last[1] = n.hi,
                _ => ranges.push([n.lo, n.hi]),
            }
        }
        units.push(Unit { own: [own.lo, own.hi], ranges: [first, ranges.len() as u32], pairs });
    }
    units.sort_unstable_by_key(|u| (std::cmp::Reverse(u.pairs), u.own[0]));
    (units, ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    /// The key as `problems/distance.cu` computes it in f32.
    fn key(a: &[f32; MAX_DIMS], b: &[f32; MAX_DIMS], dims: usize) -> f32 {
        let d0 = a[0] - b[0];
        let mut sum = d0 * d0;
        for i in 1..dims {
            let d = a[i] - b[i];
            sum = d.mul_add(d, sum);
        }
        sum
    }

    fn node(points: &[[f32; MAX_DIMS]], dims: usize) -> Node {
        let (mut min, mut max) = ([0f32; MAX_DIMS], [0f32; MAX_DIMS]);
        for d in 0..dims {
            min[d] = points.iter().map(|p| p[d]).fold(f32::INFINITY, f32::min);
            max[d] = points.iter().map(|p| p[d]).fold(f32::NEG_INFINITY, f32::max);
        }
        Node { lo: 0, hi: points.len() as u32, min, max, left: 0, right: 0 }
    }

    /// Every f32 key of two boxes' points lies within the bound the resolver
    /// takes: boxes of every scale from 2^-60 to 2^40, apart and overlapping,
    /// and the points on their corners (where the real extremes lie).
    #[test]
    fn every_key_of_two_boxes_lies_within_the_bound() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        for _ in 0..20_000 {
            let dims = rng.random_range(1..=3usize);
            let scale = 2f32.powi(rng.random_range(-60..40));
            let width = scale * 10f32.powi(-rng.random_range(0..6i32));
            let corner = |rng: &mut rand::rngs::StdRng| {
                let o: Vec<f32> = (0..dims).map(|_| scale * (rng.random::<f32>() - 0.5)).collect();
                (0..16)
                    .map(|k| {
                        let mut p = [0f32; MAX_DIMS];
                        for d in 0..dims {
                            // Corners (k < 8) and inner points.
                            let t = if k < 8 { ((k >> d) & 1) as f32 } else { rng.random::<f32>() };
                            p[d] = o[d] + width * t;
                        }
                        p
                    })
                    .collect::<Vec<_>>()
            };
            let (pa, pb) = (corner(&mut rng), corner(&mut rng));
            let (na, nb) = (node(&pa, dims), node(&pb, dims));
            let r = Resolver {
                a: &Tree { entries: vec![], nodes: vec![] },
                b: &Tree { entries: vec![], nodes: vec![] },
                one_set: false,
                own_leaf: 2,
                dims,
                rel: Metric::Euclidean.relative(dims),
                classes: &Firsts::of(&Buckets::Log { edges: vec![1.0, 2.0] }),
                left: AtomicU64::new(0),
                most_left: 0,
                gave_up: AtomicBool::new(false),
                watch: crate::stop::Watch::start(),
            };
            let (mut near, mut far) = (0f64, 0f64);
            for d in 0..dims {
                let gap = (nb.min[d] as f64 - na.max[d] as f64).max(na.min[d] as f64 - nb.max[d] as f64).max(0.0);
                let span = (na.max[d] as f64 - nb.min[d] as f64).max(nb.max[d] as f64 - na.min[d] as f64);
                near += gap * gap;
                far += span * span;
            }
            let lo = f32_down((near * (1.0 - r.rel) - ABS).max(0.0));
            let hi = f32_up(far * (1.0 + r.rel) + ABS);
            for a in &pa {
                for b in &pb {
                    let k = key(a, b, dims);
                    assert!(lo <= k && k <= hi, "key {k:e} of {a:?} and {b:?} outside [{lo:e}, {hi:e}]");
                }
            }
        }
    }

    /// The tree as first written (an index sorted over the points, each
    /// cell's box in passes over it, halves' cells concatenated): the tree
    /// of entries reordered in place is the same cell for cell.
    #[test]
    fn trees_are_the_index_sorted_trees() {
        fn reference(points: &[[f32; MAX_DIMS]], idx: &mut [u32], lo: u32, dims: usize, leaf: usize) -> Vec<Node> {
            let (mut min, mut max) = ([0f32; MAX_DIMS], [0f32; MAX_DIMS]);
            for d in 0..dims {
                min[d] = idx.iter().map(|&i| points[i as usize][d]).fold(f32::INFINITY, f32::min);
                max[d] = idx.iter().map(|&i| points[i as usize][d]).fold(f32::NEG_INFINITY, f32::max);
            }
            let hi = lo + idx.len() as u32;
            if idx.len() <= leaf {
                return vec![Node { lo, hi, min, max, left: 0, right: 0 }];
            }
            let axis = (0..dims).max_by(|&a, &b| (max[a] - min[a]).total_cmp(&(max[b] - min[b]))).unwrap_or(0);
            let mid = idx.len() / 2;
            idx.select_nth_unstable_by(mid, |&a, &b| points[a as usize][axis].total_cmp(&points[b as usize][axis]));
            let (l, r) = idx.split_at_mut(mid);
            let (left, right) =
                (reference(points, l, lo, dims, leaf), reference(points, r, lo + mid as u32, dims, leaf));
            let shift = |nodes: Vec<Node>, by: u32| {
                nodes
                    .into_iter()
                    .map(move |n| if n.is_leaf() { n } else { Node { left: n.left + by, right: n.right + by, ..n } })
            };
            let right_at = 1 + left.len() as u32;
            let mut out = vec![Node { lo, hi, min, max, left: 1, right: right_at }];
            out.extend(shift(left, 1));
            out.extend(shift(right, right_at));
            out
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        for (n, leaf) in [(0, 2), (1, 2), (7, 2), (1000, 16), (100_000, 7), (300_000, 128)] {
            let dims = rng.random_range(1..=3usize);
            // Clusters, duplicates and a lattice: ties in the median's comparisons.
            let points: Vec<[f32; MAX_DIMS]> = (0..n)
                .map(|i| {
                    let mut p = [0f32; MAX_DIMS];
                    for x in p.iter_mut().take(dims) {
                        *x = match i % 3 {
                            0 => rng.random::<f32>(),
                            1 => rng.random_range(0..8u32) as f32 / 8.0,
                            _ => 0.5 + 1e-3 * rng.random::<f32>(),
                        };
                    }
                    p
                })
                .collect();
            let mut idx: Vec<u32> = (0..n as u32).collect();
            let want = reference(&points, &mut idx, 0, dims, leaf);
            let t = tree(points.iter().enumerate().map(|(i, &p)| Entry { p, row: i as u32 }).collect(), dims, leaf);
            assert_eq!(t.entries.iter().map(|e| e.row).collect::<Vec<_>>(), idx, "{n} points, leaves of {leaf}");
            assert!(t.entries.iter().all(|e| e.p == points[e.row as usize]));
            assert_eq!(t.nodes.len(), want.len(), "{n} points, leaves of {leaf}");
            for (k, (a, b)) in t.nodes.iter().zip(&want).enumerate() {
                let same = (a.lo, a.hi, a.left, a.right) == (b.lo, b.hi, b.left, b.right)
                    && a.min.map(f32::to_bits) == b.min.map(f32::to_bits)
                    && a.max.map(f32::to_bits) == b.max.map(f32::to_bits);
                assert!(same, "{n} points, leaves of {leaf}: cell {k} is {a:?}, was {b:?}");
            }
        }
    }

    /// Own cells larger than their partners (units of own cells, partner
    /// leaves split further): the resolved counts and the units' pairs, each
    /// counted once as the grid walk does (the first range of one set's unit
    /// from the point after i), make brute force's histogram, every unit's
    /// own points at most the own size.
    #[test]
    fn own_cells_larger_than_their_partners_count_every_pair_once() {
        use crate::data::{Column, Inputs, PointSet};
        let problem = crate::problems::built_in("sdh").unwrap().with_spacing(Spacing::Log).unwrap();
        let params = problem.bind(&["bins=20".into(), "r_min=0.001".into(), "r_max=0.5".into()]).unwrap();
        let seed: u64 = rand::rng().random();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        // Clusters of 0.01 (many pairs near the first buckets), duplicates and uniform points;
        // three clusters fixed so that every draw has cell pairs wholly past r_max (the first
        // two, 1.56 apart) and wholly in one bucket (the first and third, 0.29-0.31 apart, in
        // [0.269, 0.367)). Drawn centres alone resolved nothing into buckets with
        // leaves of 16 in 7 of 400 draws; with these, none of 800 failed.
        let mut centres: Vec<[f32; 3]> = vec![[0.05; 3], [0.95; 3], [0.35, 0.05, 0.05]];
        centres.extend((0..5).map(|_| [rng.random(), rng.random(), rng.random()]));
        let mut pts: Vec<[f32; MAX_DIMS]> = Vec::new();
        while pts.len() < 2500 {
            let c = centres[rng.random_range(0..centres.len())];
            let p = match rng.random_range(0..4u32) {
                0 => [rng.random(), rng.random(), rng.random()],
                1 if !pts.is_empty() => pts[rng.random_range(0..pts.len())],
                _ => c.map(|x| x + 0.01 * (rng.random::<f32>() - 0.5)),
            };
            pts.push(p);
        }
        let n = pts.len();
        let inputs = Inputs {
            a: PointSet {
                columns: (0..3).map(|d| Column::F32(pts.iter().map(|p| p[d]).collect())).collect(),
                origin: "test".into(),
                rows: None,
            },
            b: None,
        };
        let how = applies(&problem, &params, &inputs, Visit::LowerTriangle, false).unwrap();
        let slots = how.buckets.slots() as usize;
        let mut want = vec![0u64; slots + 2];
        for i in 0..n {
            for j in i + 1..n {
                want[how.buckets.class(key(&pts[i], &pts[j], 3)) as usize] += 1;
            }
        }
        for leaves in [Leaves::of(16), Leaves { own: 64, partner: 8 }, Leaves { own: 40, partner: 2 }] {
            let c = build(&how, &inputs, Visit::LowerTriangle, leaves, CPU_COSTS, None).unwrap();
            let cols: Vec<&[f32]> = c
                .grid
                .a
                .set
                .columns
                .iter()
                .map(|col| match col {
                    Column::F32(v) => v.as_slice(),
                    _ => unreachable!(),
                })
                .collect();
            let at = |i: u32| [cols[0][i as usize], cols[1][i as usize], cols[2][i as usize]];
            let mut got = vec![0u64; slots + 2];
            got[1..=slots].copy_from_slice(&c.counts);
            got[0] = c.outside; // below and past the buckets together, checked as a sum
            let mut walked = 0u64;
            for u in &c.grid.units {
                assert!(u.own[1] - u.own[0] <= leaves.own, "{leaves:?}: a unit of {} own points", u.own[1] - u.own[0]);
                let mut pairs = 0u64;
                for (k, r) in c.grid.ranges[u.ranges[0] as usize..u.ranges[1] as usize].iter().enumerate() {
                    for i in u.own[0]..u.own[1] {
                        let from = if k == 0 { r[0].max(i + 1) } else { r[0] };
                        for j in from..r[1] {
                            let class = how.buckets.class(key(&at(i), &at(j), 3)) as usize;
                            got[if class == 0 || class == slots + 1 { 0 } else { class }] += 1;
                            pairs += 1;
                        }
                    }
                }
                assert_eq!(pairs, u.pairs, "{leaves:?}: the unit's pairs");
                walked += pairs;
            }
            assert_eq!(walked, c.grid.pairs as u64, "{leaves:?}");
            let mut want = want.clone();
            want[0] += want[slots + 1];
            want[slots + 1] = 0;
            assert_eq!(got, want, "{leaves:?}, seed {seed}: resolved and walked against every pair");
            assert!(
                c.outside > 0 && c.counts.iter().sum::<u64>() > 0,
                "{leaves:?}, seed {seed}: resolved {} pairs outside and {} in buckets",
                c.outside,
                c.counts.iter().sum::<u64>()
            );
        }
    }

    /// The class of a key is its value's bucket as `bucket.cu` computes it.
    #[test]
    fn classes_are_the_values_buckets_and_never_decrease() {
        let linear = Buckets::Linear { lo: 0.0, scale: 50.0 / 1.7320508, slots: 50 };
        let edges: Vec<f32> = (0..=20).map(|k| (0.001f64 * (500f64.ln() * k as f64 / 20.0).exp()) as f32).collect();
        let log = Buckets::Log { edges: edges.clone() };
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        let mut keys: Vec<f32> = (0..200_000).map(|_| 3.5 * rng.random::<f32>().powi(4)).collect();
        keys.sort_by(f32::total_cmp);
        let (mut last_linear, mut last_log) = (0, 0);
        for &k in &keys {
            let v = k.sqrt();
            let x = v * (50.0 / 1.7320508f32);
            let want = if x < 50.0 { x as u32 + 1 } else { 51 };
            assert_eq!(linear.class(k), want, "linear key {k:e}");
            let want = if v < edges[0] { 0 } else { edges.iter().filter(|&&e| v >= e).count() as u32 };
            assert_eq!(log.class(k), want, "log key {k:e}");
            assert!(linear.class(k) >= last_linear && log.class(k) >= last_log);
            (last_linear, last_log) = (linear.class(k), log.class(k));
        }
        // The thresholds the resolver classes keys by: the same class for
        // every key drawn, and for keys on and a few ulps beside each threshold.
        for buckets in [linear, log, Buckets::Linear { lo: 0.25, scale: 500.0 / 1.5, slots: 500 }] {
            let firsts = Firsts::of(&buckets);
            let near = firsts
                .0
                .iter()
                .filter(|&&t| t != u32::MAX)
                .flat_map(|&t| t.saturating_sub(3)..=t.saturating_add(3).min(INF));
            let special = [0.0, f32::MIN_POSITIVE, 1e-30, 3.0, 1e30, f32::MAX, f32::INFINITY];
            for k in keys.iter().copied().chain(near.map(f32::from_bits)).chain(special) {
                let c = buckets.class(k);
                assert_eq!(firsts.class(k), c, "key {k:e} ({:#x}) of {buckets:?}", k.to_bits());
                assert!(firsts.same(c, k), "key {k:e}");
                assert!(!firsts.same(c, f32::INFINITY) || buckets.class(f32::INFINITY) == c, "key {k:e}");
            }
        }
    }
}
