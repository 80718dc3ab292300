//! The grid index of a cut-off problem: both sets sorted into cells no
//! narrower than the spec's cutoff, and for each run of set A's points in one
//! cell, the ranges of the other set's sorted points that can hold its
//! partners. A backend then visits only those pairs. The index is chosen here
//! from the data: brute force stays where the grid would not skip enough.

pub mod cells;

use serde::Serialize;

use crate::data::{Column, ESTIMATE_SAMPLE, Inputs, PointSet, Shapes};
use crate::spec::{CutoffOver, Element, Metric, Output, Params, Problem};
use crate::stage::RingShape;
use crate::stage::visit::Visit;

/// `--index`: how the pairs to visit are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum IndexChoice {
    /// A grid where the spec declares a cutoff and the grid skips at least
    /// half of the pairs; every pair otherwise.
    #[default]
    Auto,
    /// The grid (the spec must declare a cutoff), whatever it skips.
    Grid,
    /// Every pair.
    None,
    /// The cell hierarchy, whatever it saves, where it applies (histograms
    /// of the built-in distances).
    Cells,
}

/// Which pairs a backend's code walks: every pair of the visit, or the grid's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexKind {
    None,
    /// The pairs of neighbouring cells: a cutoff's grid.
    Grid,
    /// KNN on a grid: each query searches rings of cells around its own,
    /// nearest first, until its K-th value lies within the ring's reach.
    Rings,
}

impl IndexKind {
    pub fn is_none(&self) -> bool {
        *self == IndexKind::None
    }

    pub fn name(self) -> &'static str {
        match self {
            IndexKind::None => "none",
            IndexKind::Grid => "grid",
            IndexKind::Rings => "rings",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("--index grid needs a <cutoff> in the spec of `{0}`: without one every pair may contribute")]
    NoCutoff(String),
    #[error("--index grid: {0}")]
    Unusable(String),
    #[error("--index cells: {0}")]
    NoCells(String),
}

/// Most axes a grid indexes: a cell's neighbours then lie in 3^(k-1) runs.
const MAX_AXES: usize = 3;
/// An axis is indexed only if it gets this many cells (for a reach of one
/// cell; 2 reach + 2 for a reach of several): with three, a middle cell's
/// neighbours are every cell.
const MIN_CELLS: u64 = 4;
/// Most cells a cutoff spans ([`Cells::Finer`], [`Cells::Widest`]).
const MAX_REACH: u32 = 4;
/// Fewest points of the other set a run of 2 reach + 1 finer cells should
/// hold on average, so that each run's loop amortises its setup (measured:
/// see `choose_reach`).
const RUN_POINTS: f64 = 48.0;

/// How wide a grid's cells are against the cutoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cells {
    /// The widest cells that give the grid its most axes: as wide as the
    /// cutoff (reach 1) wherever that indexes as many axes as finer cells
    /// would, else 1 / reach of it for the least reach that does (a cutoff
    /// of a quarter of a periodic box leaves 3 cells as wide as itself, too
    /// few for an axis, and 7 half as wide). The GPU's builder walks the
    /// (2 reach + 1)^k cells around a unit itself.
    Widest,
    /// A fraction 1 / reach of the cutoff, reach chosen from the density
    /// (the CPU's driver walks the host's ranges, whatever their number):
    /// the (2 reach + 1)^k cells around a unit hold fewer pairs beyond the
    /// cutoff, (1 + 1 / (2 reach))^k times the cutoff's cube against 27 / 8
    /// of it in 3-D.
    Finer,
}
/// The grid is chosen (`auto`) when it visits at most this share of the pairs.
const MAX_SHARE: f64 = 0.5;

/// One indexed coordinate: cell c holds the values in [origin + c side,
/// origin + (c + 1) side); on a periodic axis cell n - 1 neighbours cell 0.
/// The coordinate is a component, or in a triclinic box the distance along
/// the normal of a pair of the box's faces (`normal`, over the components
/// x, y, z): fractional coordinate times the faces' width, which wraps at
/// that width.
#[derive(Debug, Clone, Serialize)]
pub struct Axis {
    pub component: usize,
    pub name: String,
    pub origin: f64,
    pub side: f64,
    pub cells: u32,
    pub periodic: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub normal: Option<[f64; 3]>,
}

impl Axis {
    /// Point i's coordinate on this axis, in f64 (as `templates/index/grid.cu` computes it).
    pub fn coordinate(&self, set: &PointSet, i: usize) -> f64 {
        match self.normal {
            None => set.columns[self.component].get_f64(i),
            Some(n) => {
                let mut u = 0.0;
                for (k, column) in set.columns.iter().take(3).enumerate() {
                    u += n[k] * column.get_f64(i);
                }
                u
            }
        }
    }

    /// The cells of rows 0, step, 2 step, ... of `set`: a column's values in
    /// one loop where the axis is a component (no point-by-point dispatch).
    fn cells_of(&self, set: &PointSet, step: usize) -> Vec<u32> {
        match (self.normal, &set.columns[self.component]) {
            (None, Column::F32(v)) => v.iter().step_by(step).map(|&x| self.cell(f64::from(x))).collect(),
            (None, Column::F64(v)) => v.iter().step_by(step).map(|&x| self.cell(x)).collect(),
            _ => (0..set.len()).step_by(step).map(|i| self.cell(self.coordinate(set, i))).collect(),
        }
    }

    fn cell(&self, x: f64) -> u32 {
        let q = if self.periodic {
            let t = (x - self.origin) / (self.side * self.cells as f64);
            (t - floor(t)) * self.cells as f64
        } else {
            (x - self.origin) / self.side
        };
        // floor(q) clamped to 0: a cast truncates toward zero, the floor from
        // 0 up, and a NaN casts to 0 as it clamped there.
        (q.max(0.0) as u64).min(self.cells as u64 - 1) as u32
    }
}

/// `x.floor()`, without the call to libm that `f64::floor` is on x86-64's
/// baseline (no SSE4.1): 14 ns a point of a KNN schedule's sample on the
/// H200's host. Casts truncate toward zero, exactly for |x| < 2^52, where
/// a negative x with a fraction steps down; beyond, every float is whole.
fn floor(x: f64) -> f64 {
    if x.abs() < (1u64 << 52) as f64 {
        let t = x as i64 as f64;
        if t > x { t - 1.0 } else { t }
    } else {
        x
    }
}

/// A set in cell order: `set` holds the points, `perm[k]` is the index in the
/// input of sorted point k, `cell[k]` its cell, and cell c's points are
/// `cell_start[c]..cell_start[c + 1]`.
#[derive(Debug, Clone)]
pub struct Sorted {
    pub set: PointSet,
    pub perm: Vec<u32>,
    pub cell: Vec<u32>,
    pub cell_start: Vec<u32>,
}

/// Own points `own` of set A (sorted), to be paired with the other set's
/// sorted points in `ranges[ranges.0..ranges.1]` of the grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Unit {
    pub own: [u32; 2],
    pub ranges: [u32; 2],
    /// Pairs the unit visits.
    pub pairs: u64,
}

/// The grid of one run.
#[derive(Debug, Clone)]
pub struct Grid {
    pub axes: Vec<Axis>,
    /// Cells a cutoff spans ([`Layout::reach`]).
    pub reach: u32,
    pub a: Sorted,
    /// The other set, for two-set problems.
    pub b: Option<Sorted>,
    /// Units, most pairs first (for a search of rings, those of the first
    /// ring: the pairs it visits at least).
    pub units: Vec<Unit>,
    /// [lo, hi) runs of the other set's sorted points.
    pub ranges: Vec<[u32; 2]>,
    /// Pairs the grid visits, all units together.
    pub pairs: u128,
}

/// Below this share of a ring's width, a point outside ring r of cells lies
/// farther than r ring widths in a component, whatever rounding did: the
/// cells are placed in f64 (error 2^-52 of the extent, far below 2^-16 of
/// a cell at most 2^24 cells wide), and a pair's f32 value is at least its
/// separation less a few units in the last place (2^-24 each).
const REACH_MARGIN: f64 = 1.0 - 1.0 / 65536.0;

/// What a search of rings over `axes`' cells reads: cells per axis (1 past
/// the grid's axes), a bit per wrapping axis, and the reach of a ring over
/// r (a point outside ring r lies more than r times it from the query in
/// some component, so a K-th value below that is final).
pub fn ring_shape(axes: &[Axis]) -> RingShape {
    RingShape {
        cells: [0, 1, 2].map(|k| axes.get(k).map_or(1, |a| a.cells)),
        periodic: axes.iter().enumerate().map(|(k, a)| u32::from(a.periodic) << k).sum(),
        reach: axes.iter().map(|a| a.side).fold(f64::INFINITY, f64::min) * REACH_MARGIN,
    }
}

impl Grid {
    pub fn other(&self) -> &Sorted {
        self.b.as_ref().unwrap_or(&self.a)
    }

    /// The other set's points unit `u` meets (before its own row's order or
    /// the self pair take any away).
    pub fn partners(&self, u: &Unit) -> u64 {
        self.ranges[u.ranges[0] as usize..u.ranges[1] as usize].iter().map(|r| (r[1] - r[0]) as u64).sum()
    }
}

/// What the runner decided, and why: shown in the report and the plan.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub index: IndexKind,
    pub why: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cells: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub axes: Option<Vec<Axis>>,
    /// Pairs visited, against `all_pairs` without the grid.
    pub pairs: u128,
    pub all_pairs: u128,
    /// The units are the cell hierarchy's leaf pairs ([`crate::index::cells`]),
    /// walked by the grid's code (`index` is then Grid).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub hierarchy: bool,
}

impl Summary {
    /// Every pair visited, for `why`.
    pub fn brute(why: String, all_pairs: u128) -> Summary {
        Summary { index: IndexKind::None, why, cells: None, axes: None, pairs: all_pairs, all_pairs, hierarchy: false }
    }

    /// The index as `--index` names it: none, grid, rings or cells.
    pub fn name(&self) -> &'static str {
        if self.hierarchy { "cells" } else { self.index.name() }
    }
}

/// The cells a grid would have: the axes, and how the cutoff reads in the
/// report. Made from the data's extent alone; a backend then sorts the
/// points into them ([`build`] on the host).
#[derive(Debug, Clone)]
pub struct Layout {
    /// Grid for a cutoff's value, Rings for KNN.
    pub kind: IndexKind,
    pub axes: Vec<Axis>,
    pub cells: u64,
    /// Cells a cutoff spans: a unit meets the cells within `reach` of its own on each axis.
    pub reach: u32,
    /// The cutoff's metric: under a Euclidean one, of those cells only the
    /// ones whose nearest points lie within the cutoff ([`row_offsets`]).
    pub metric: Metric,
    /// `cutoff eps=0.01 over x,y`.
    pub cutoff: String,
}

/// Most cells whose sampled points [`Layout::sampled_neighbours`] counts
/// cell by cell (1 MB of counts, and at most 16 a sampled point) rather
/// than by searching sorted keys.
const PREFIX_CELLS: u64 = 1 << 18;
/// Queries whose median count sizes KNN's cells: the median of 4096 lies
/// within about 2% of ranks of the whole set's.
const MEDIAN_QUERIES: usize = 1 << 12;

impl Layout {
    /// Rows of cells: the cells that share every axis but the first.
    pub fn rows(&self) -> u64 {
        self.cells / self.axes.first().map_or(1, |a| u64::from(a.cells))
    }

    /// The pairs of points in neighbouring cells (what a grid of one cell per
    /// unit visits), estimated from each set's sample: exact for sets no
    /// larger than the sample. It looks up each sampled point's 3^k
    /// neighbour cells among the other sample's sorted cells, so it costs
    /// milliseconds however many cells the grid has.
    pub fn estimated_pairs(&self, shapes: &Shapes, visit: Visit) -> u128 {
        let (met, scales) = self.sampled_neighbours(shapes, ESTIMATE_SAMPLE);
        let sampled = met.len() as u64;
        let met: u64 = met.iter().sum();
        // One set: each sampled point met itself, and a lower triangle each pair twice.
        let met = match visit {
            Visit::Cross => met,
            Visit::AllPairs => met - sampled,
            Visit::LowerTriangle => (met - sampled) / 2,
        };
        (met as f64 * scales[0] * scales[1]).round() as u128
    }

    /// The other set's points in the 3^k cells around the median query,
    /// estimated from the samples (a median needs fewer queries than a sum).
    fn median_neighbours(&self, shapes: &Shapes) -> f64 {
        let (mut met, scales) = self.sampled_neighbours(shapes, MEDIAN_QUERIES);
        if met.is_empty() {
            return 0.0;
        }
        let middle = met.len() / 2;
        let (_, &mut median, _) = met.select_nth_unstable(middle);
        median as f64 * scales[1]
    }

    /// For about `queries` points of set A's sample (evenly strided), the
    /// points of the other set's sample (itself included, for one set) in
    /// the 3^k cells around its own; and each sample's factor to its whole
    /// set. Cells of a row (axis 0) have consecutive keys, so each of the
    /// 3^(k-1) rows around a point is one or two ranges of the sorted keys;
    /// the samples split over every core.
    fn sampled_neighbours(&self, shapes: &Shapes, queries: usize) -> (Vec<u64>, [f64; 2]) {
        use rayon::prelude::*;
        let other = &shapes.other().sample;
        let a = &shapes.a.sample;
        let step = a.len().div_ceil(queries).max(1);
        // Each sampled point's cell, an axis at a time: the other sample's
        // whole, and A's queries (the same points again for one set). A
        // KNN call's schedule spent 0.5-0.7 ms here on the H200's host
        // when each point's cells were found one point at a time.
        let other_cells: Vec<Vec<u32>> = self.axes.iter().map(|axis| axis.cells_of(other, 1)).collect();
        let query_cells: Vec<Vec<u32>> = match shapes.b {
            None => other_cells.iter().map(|c| c.iter().step_by(step).copied().collect()).collect(),
            Some(_) => self.axes.iter().map(|axis| axis.cells_of(a, step)).collect(),
        };
        let k = self.axes.len();
        // A cell's key: axis 0 varies fastest, so a row's cells have consecutive keys.
        let key =
            |c: &[i64; MAX_AXES]| self.axes.iter().zip(c).rev().fold(0u64, |k, (a, &x)| k * a.cells as u64 + x as u64);
        let cell_at = |cells: &[Vec<u32>], i: usize| -> [i64; MAX_AXES] {
            let mut c = [0; MAX_AXES];
            for (x, axis) in c.iter_mut().zip(cells) {
                *x = i64::from(axis[i]);
            }
            c
        };
        let mut keys: Vec<u64> = (0..other.len()).map(|i| key(&cell_at(&other_cells, i))).collect();
        // Where the cells are few, the sampled points before each cell (a
        // counting pass) answer a run in two reads; else the sorted keys by
        // two binary searches (a query's rows took 4096 x 9 x 4 of them,
        // most of a KNN schedule's milliseconds). Both count the same keys.
        let before: Option<Vec<u32>> = (self.cells <= PREFIX_CELLS.min(16 * keys.len() as u64 + 1024)).then(|| {
            let mut before = vec![0u32; self.cells as usize + 1];
            for &x in &keys {
                before[x as usize + 1] += 1;
            }
            for c in 1..before.len() {
                before[c] += before[c - 1];
            }
            before
        });
        if before.is_none() {
            keys.sort_unstable();
        }
        // Sampled keys in cells [lo, hi] of the row whose first cell's key is `row`.
        let in_run = |row: u64, lo: i64, hi: i64| -> u64 {
            let (from, to) = (row + lo as u64, row + hi as u64);
            match &before {
                Some(before) => u64::from(before[to as usize + 1] - before[from as usize]),
                None => (keys.partition_point(|&x| x <= to) - keys.partition_point(|&x| x < from)) as u64,
            }
        };
        // The rows around a cell, once for every query.
        let rows = row_offsets(k, false, self.reach, self.metric, &self.axes);
        let met_around = |c: [i64; MAX_AXES]| -> u64 {
            // No axis: one cell, which holds every point.
            let Some(axis0) = self.axes.first() else { return keys.len() as u64 };
            let mut met = 0u64;
            let (n0, c0) = (axis0.cells as i64, c[0]);
            for row in &rows {
                let mut n = c;
                let mut outside = false;
                for ((x, axis), o) in n.iter_mut().zip(&self.axes).zip(row.offset).skip(1) {
                    let cells = axis.cells as i64;
                    *x += o;
                    if axis.periodic {
                        *x = x.rem_euclid(cells);
                    } else if !(0..cells).contains(x) {
                        outside = true;
                    }
                }
                if outside {
                    continue;
                }
                n[0] = 0;
                let first = key(&n);
                // Cells c0 - reach ..= c0 + reach of the row: clipped, or wrapped into
                // two runs (an axis has at least 2 reach + 2 cells, so none is met twice).
                let reach = row.reach;
                met += match (axis0.periodic, c0 - reach < 0, c0 + reach >= n0) {
                    (true, true, _) => in_run(first, n0 + c0 - reach, n0 - 1) + in_run(first, 0, c0 + reach),
                    (true, _, true) => in_run(first, c0 - reach, n0 - 1) + in_run(first, 0, c0 + reach - n0),
                    _ => in_run(first, (c0 - reach).max(0), (c0 + reach).min(n0 - 1)),
                };
            }
            met
        };
        let queried = query_cells.first().map_or(a.len().div_ceil(step), Vec::len);
        // Queries on every core, in tasks large enough to pay for waking them.
        let met: Vec<u64> =
            (0..queried).into_par_iter().with_min_len(1 << 10).map(|i| met_around(cell_at(&query_cells, i))).collect();
        let scale = |whole: usize, sampled: usize| whole as f64 / sampled.max(1) as f64;
        (met, [scale(shapes.a.len, queried), scale(shapes.other().len, other.len())])
    }
}

/// The layout of `problem`'s grid on `inputs`, or the summary of a run that
/// visits every pair, with the reason (an error where `--index grid` cannot be honoured).
pub fn layout(
    problem: &Problem,
    params: &Params,
    shapes: &Shapes,
    all_pairs: u128,
    choice: IndexChoice,
    fineness: Cells,
) -> Result<Result<Layout, Summary>, IndexError> {
    let brute = |why: String| Summary::brute(why, all_pairs);
    if choice == IndexChoice::None {
        return Ok(Err(brute("--index none: every pair".into())));
    }
    let Some(cutoff) = &problem.cutoff else {
        if choice == IndexChoice::Grid {
            return Err(IndexError::NoCutoff(problem.name.clone()));
        }
        return Ok(Err(brute("the spec declares no cutoff: every pair may contribute".into())));
    };
    let components = problem.input.components();
    let over: Vec<usize> = match &cutoff.over {
        CutoffOver::Coordinates => match problem.input.element {
            Element::Vector { dims, .. } => (0..dims as usize).collect(),
            Element::Record { .. } => unreachable!("the spec reader asks records for `over`"),
        },
        CutoffOver::Fields(names) => names
            .iter()
            .map(|n| components.iter().position(|c| &c.name == n).expect("the spec reader checked the names"))
            .collect(),
    };
    let periodic = problem.periodic_box(params);
    let points: usize = shapes.sets().map(|s| s.len).sum();
    // Each covered component's origin, extent and, in a periodic box,
    // length; in a triclinic box the distance along each pair of faces'
    // normal instead, which wraps at the faces' width.
    let spans: Vec<Span> = over
        .iter()
        .map(|&c| {
            let (origin, extent, length, normal, slack) = match &periodic {
                Some((_, b)) if b.is_triclinic() && c < 3 => {
                    let width = b.widths()[c];
                    // Rounding a separation moves it by units of the box's
                    // coordinates, which reach the sum of its edges' lengths.
                    let reach: f64 = b.edges().iter().map(|e| e.iter().map(|x| x * x).sum::<f64>().sqrt()).sum();
                    (0.0, width, Some(width), Some(b.normals()[c]), reach / ROUNDING)
                }
                Some((_, b)) => (0.0, b.lengths[c], Some(b.lengths[c]), None, b.lengths[c] / ROUNDING),
                None => {
                    let (lo, hi) = shapes
                        .sets()
                        .map(|s| s.ranges[c])
                        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), (a, b)| (l.min(a), h.max(b)));
                    (lo, hi - lo, None, None, (hi - lo) / ROUNDING)
                }
            };
            let name = match normal {
                Some(_) => format!("{}' (along the normal of faces {})", components[c].name, ["yz", "zx", "xy"][c]),
                None => components[c].name.clone(),
            };
            Span {
                component: c,
                name,
                integer: components[c].scalar.is_integer(),
                origin,
                extent,
                length,
                normal,
                slack,
            }
        })
        .collect();
    let cap = (2 * points as u64).clamp(1 << 10, 1 << 24);
    let over_names = over.iter().map(|&c| components[c].name.as_str()).collect::<Vec<_>>().join(",");
    Ok(Ok(match (&cutoff.value, &problem.output) {
        (Some(value), _) => {
            let width = params.eval(value).as_f64();
            let (axes, cells, reach) = match fineness {
                Cells::Widest => widest_axes(width, &spans, cap),
                Cells::Finer => finer_axes(width, &spans, cap, shapes.other().len),
            };
            if axes.is_empty() && choice == IndexChoice::Auto {
                // One cell would hold every point: the grid would visit every pair.
                return Ok(Err(brute(format!(
                    "cutoff {} over {over_names} leaves fewer than {MIN_CELLS} cells on every axis of the data: every pair",
                    params.describe(value)
                ))));
            }
            // The ball's cells are found from gaps along each axis summed as
            // squares, a bound on the distance only where the axes are
            // orthogonal: a triclinic box's face normals are not.
            let metric = match axes.iter().any(|a| a.normal.is_some()) {
                true => Metric::Component,
                false => cutoff.metric,
            };
            let met: i64 = row_offsets(axes.len(), false, reach, metric, &axes).iter().map(|r| 2 * r.reach + 1).sum();
            let cube = reach_cells(reach, axes.len());
            let finer = match reach {
                1 => String::new(),
                m if met < (2 * m as i64 + 1).pow(axes.len() as u32) => format!(
                    " in cells 1/{m} of it wide, each meeting the {met} of the {cube} around it whose nearest points lie within it (metric euclidean)"
                ),
                m => format!(" in cells 1/{m} of it wide, each meeting the {cube} around it"),
            };
            Layout {
                kind: IndexKind::Grid,
                axes,
                cells,
                reach,
                metric,
                cutoff: format!("cutoff {} over {over_names}{finer}", params.describe(value)),
            }
        }
        (None, Output::Knn { k }) => {
            let k = params.eval(k).as_f64() as u32;
            let (side, axes, cells) = knn_side(k, &spans, cap, shapes);
            let target = ring_target(k, axes.len()).round();
            Layout {
                kind: IndexKind::Rings,
                axes,
                cells,
                reach: 1,
                metric: Metric::Component,
                cutoff: format!(
                    "K = {k}: rings of cells {side:.6e} wide over {over_names}, sized from a sample for ~{target} candidates a query"
                ),
            }
        }
        (None, _) => unreachable!("the spec reader gives a cutoff without a value only to KNN"),
    }))
}

/// A component a cutoff covers, over both sets.
struct Span {
    component: usize,
    name: String,
    integer: bool,
    origin: f64,
    extent: f64,
    /// The box's length, on a periodic axis.
    length: Option<f64>,
    /// In a triclinic box, the unit normal the axis's coordinate is taken along.
    normal: Option<[f64; 3]>,
    /// What rounding may move a pair's separation by, and more (2^-20 of the
    /// extent, or of a triclinic box's edges together).
    slack: f64,
}

/// The share of an extent that cells are widened by, against rounding (docs/planner.md).
const ROUNDING: f64 = (1u64 << 20) as f64;

/// The axes of cells no narrower than `value / reach`: the covered
/// components with the most cells (as many as fit their extents, at least
/// 2 reach + 2), at most `MAX_AXES`, while the cells stay within `cap`; the
/// last one coarsened to fit. A pair within `value` then lies within `reach`
/// cells of each other on every axis.
fn fit_axes(value: f64, spans: &[Span], cap: u64, reach: u32) -> (Vec<Axis>, u64) {
    let least_cells = MIN_CELLS.max(2 * reach as u64 + 2);
    let mut candidates: Vec<Axis> = Vec::new();
    for span in spans {
        let extent = span.extent;
        // Wider than the cutoff by more than rounding: whole numbers differ by
        // at least 1 past it; floats by 2^-10 of it plus 2^-20 of the extent,
        // far above what rounding a separation in f32 can move it.
        let least = if span.integer {
            (value + 0.5) / reach as f64
        } else {
            value * (1.0 + 1.0 / 1024.0) / reach as f64 + span.slack
        };
        if !least.is_finite() || least <= 0.0 || !extent.is_finite() {
            continue;
        }
        // A periodic axis splits its length evenly; an open one starts at the
        // smallest value, with cells of the least width.
        let (side, cells) = match span.length {
            Some(length) => {
                let cells = (length / least).floor() as u64;
                (length / cells.max(1) as f64, cells)
            }
            None => (least, (extent / least).floor() as u64 + 1),
        };
        let axis = Axis {
            component: span.component,
            name: span.name.clone(),
            origin: span.origin,
            side,
            cells: cells.min(u32::MAX as u64) as u32,
            periodic: span.length.is_some(),
            normal: span.normal,
        };
        if axis.cells as u64 >= least_cells {
            candidates.push(axis);
        }
    }
    candidates.sort_by(|x, y| y.cells.cmp(&x.cells).then(x.component.cmp(&y.component)));
    let mut axes: Vec<Axis> = Vec::new();
    let mut cells = 1u64;
    for mut axis in candidates.into_iter().take(MAX_AXES) {
        let room = cap / cells;
        if room < least_cells {
            break;
        }
        if axis.cells as u64 > room {
            let n = room;
            if axis.periodic {
                axis.side = axis.side * axis.cells as f64 / n as f64;
                axis.cells = n as u32;
            } else {
                // (cells - 1) sides cover the extent: keep that with n cells.
                axis.side = axis.side * (axis.cells as f64 - 1.0).max(1.0) / (n as f64 - 1.0);
                axis.cells = n as u32;
            }
        }
        cells *= axis.cells as u64;
        axes.push(axis);
    }
    (axes, cells)
}

/// The CPU's cells: the most a cutoff spans (its reach, up to
/// [`MAX_REACH`]) while a run of 2 reach + 1 of them holds [`RUN_POINTS`] of
/// the other set's `points` on average and the grid keeps as many axes as
/// cells as wide as the cutoff give it. Finer cells visit fewer pairs beyond
/// the cutoff, but more runs, each shorter. Where the cutoff leaves too few
/// cells as wide as itself for any axis (a quarter of a periodic box: 3),
/// finer cells still give a grid, even where too few points for them.
fn finer_axes(value: f64, spans: &[Span], cap: u64, points: usize) -> (Vec<Axis>, u64, u32) {
    let widest = widest_axes(value, spans, cap);
    for reach in (widest.2 + 1..=MAX_REACH).rev() {
        let (finer, finer_cells) = fit_axes(value, spans, cap, reach);
        let run = points as f64 / finer_cells.max(1) as f64 * (2 * reach + 1) as f64;
        if !finer.is_empty() && finer.len() >= widest.0.len() && run >= RUN_POINTS {
            return (finer, finer_cells, reach);
        }
    }
    // Too few points for finer cells: the widest that still index the most axes.
    widest
}

/// [`Cells::Widest`]: the least reach whose cells index the most axes.
fn widest_axes(value: f64, spans: &[Span], cap: u64) -> (Vec<Axis>, u64, u32) {
    let (mut axes, mut cells) = fit_axes(value, spans, cap, 1);
    let mut reach = 1;
    for finer in 2..=MAX_REACH {
        let (more, more_cells) = fit_axes(value, spans, cap, finer);
        if more.len() > axes.len() {
            (axes, cells, reach) = (more, more_cells, finer);
        }
    }
    (axes, cells, reach)
}

/// The cells around (and with) a cell within `reach` of it on `axes` axes, in words.
fn reach_cells(reach: u32, axes: usize) -> String {
    let side = 2 * reach + 1;
    match axes {
        0 => "one cell".into(),
        1 => format!("{side} cells"),
        k => format!("{side}^{k} cells"),
    }
}

/// Candidates a KNN query should meet in its first ring (the 3^k cells
/// around its own, k axes) for its K-th value to fall within the ring's
/// reach: the ball of one cell's width holds V_k / 3^k of that cube (the
/// unit ball's volume V_k: 2, pi, 4 pi / 3), and K + 2 sqrt K + 2 points in
/// the ball make K for all but about 2% of queries of evenly spread points.
fn ring_target(k: u32, axes: usize) -> f64 {
    let ball = [1.0, 2.0, std::f64::consts::PI, 4.0 / 3.0 * std::f64::consts::PI][axes.min(3)];
    let k = k as f64;
    (k + 2.0 * k.sqrt() + 2.0) * 3f64.powi(axes as i32) / ball
}

/// The cell width of a KNN grid, with its axes: such that the median sampled
/// query meets about [`ring_target`] points in its first ring. It starts
/// from the data's mean density and rescales by the sample's counts (the
/// count grows as the width to the power of the axes); clustered data then
/// gets the width of its typical query, not of its box. Where the other
/// set's sample is sparse (a ring would hold a few sampled points: 10M
/// points, 16k sampled, hold 0.3), the counts are taken over wider cells,
/// where a query meets at least [`SAMPLED_MET`] sampled points, and scaled
/// down to the ring by volume.
fn knn_side(k: u32, spans: &[Span], cap: u64, shapes: &Shapes) -> (f64, Vec<Axis>, u64) {
    let others = shapes.other().len.max(1) as f64;
    let usable: Vec<&Span> = spans.iter().filter(|s| s.extent.is_finite() && s.extent > 0.0).collect();
    let dims = usable.len().clamp(1, MAX_AXES);
    let volume: f64 = usable.iter().map(|s| s.extent).product::<f64>().max(f64::MIN_POSITIVE);
    let mut side = (volume * ring_target(k, dims) / 3f64.powi(dims as i32) / others).powf(1.0 / dims as f64);
    let mut fitted = fit_axes(side, spans, cap, 1);
    for _ in 0..3 {
        if fitted.0.is_empty() {
            break;
        }
        let target = ring_target(k, fitted.0.len());
        let sampled_met = target * others.min(ESTIMATE_SAMPLE as f64) / others;
        let widen = (SAMPLED_MET / sampled_met).max(1.0).powf(1.0 / fitted.0.len() as f64);
        let wide = fit_axes(side * widen, spans, cap, 1);
        // Wider cells must cover the same components (each with at least
        // MIN_CELLS cells) to scale by volume: the ratio of the cells' volumes.
        let same_components = wide.0.len() == fitted.0.len()
            && fitted.0.iter().all(|f| wide.0.iter().any(|w| w.component == f.component));
        let measured = if same_components { wide } else { fitted.clone() };
        let layout = Layout {
            kind: IndexKind::Rings,
            axes: measured.0,
            cells: measured.1,
            reach: 1,
            metric: Metric::Component,
            cutoff: String::new(),
        };
        let volume = |axes: &[Axis]| axes.iter().map(|a| a.side).product::<f64>();
        let ring_share = volume(&fitted.0) / volume(&layout.axes);
        let met = layout.median_neighbours(shapes) * ring_share;
        if met <= 0.0 || (met / target - 1.0).abs() < 0.25 {
            break;
        }
        side *= (target / met).powf(1.0 / fitted.0.len() as f64);
        fitted = fit_axes(side, spans, cap, 1);
    }
    (side, fitted.0, fitted.1)
}

/// Sampled points a query should meet where KNN's cell width is measured:
/// the median of counts near 3 moves in steps of a third.
const SAMPLED_MET: f64 = 32.0;

pub fn decide(layout: &Layout, pairs: u128, all_pairs: u128, choice: IndexChoice) -> Summary {
    let share = pairs as f64 / (all_pairs.max(1)) as f64;
    let described = format!(
        "{}: {} cells visit {}{} of {} pairs ({:.3}%)",
        layout.cutoff,
        layout.cells,
        if layout.kind == IndexKind::Rings { "about " } else { "" },
        pairs,
        all_pairs,
        100.0 * share
    );
    let grid = |why: String| Summary {
        index: layout.kind,
        why,
        cells: Some(layout.cells),
        axes: Some(layout.axes.clone()),
        pairs,
        all_pairs,
        hierarchy: false,
    };
    match choice {
        IndexChoice::Grid => grid(format!("--index grid: {described}")),
        _ if share <= MAX_SHARE => grid(described),
        _ => Summary::brute(format!("{described}; too many to be worth a grid, so every pair"), all_pairs),
    }
}

/// The grid for `problem` on `inputs`, sorted on the host, or None with the reason.
pub fn choose(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    visit: Visit,
    all_pairs: u128,
    choice: IndexChoice,
    runs: Runs,
) -> Result<(Option<Grid>, Summary), IndexError> {
    Ok(match layout(problem, params, &Shapes::of(inputs), all_pairs, choice, runs.cells)? {
        Ok(layout) => sort_and_decide(&layout, inputs, visit, all_pairs, choice, runs),
        Err(brute) => (None, brute),
    })
}

/// The grid of `layout` on `inputs`, sorted on the host into units of
/// `runs`, where it skips enough pairs (or `choice` forces it); None with
/// the reason where it does not.
pub fn sort_and_decide(
    layout: &Layout,
    inputs: &Inputs,
    visit: Visit,
    all_pairs: u128,
    choice: IndexChoice,
    runs: Runs,
) -> (Option<Grid>, Summary) {
    let grid = build(layout.axes.clone(), layout.reach, layout.metric, inputs, visit, runs);
    let summary = decide(layout, grid.pairs, all_pairs, choice);
    match summary.index {
        IndexKind::None => (None, summary),
        _ => (Some(grid), summary),
    }
}

/// How a backend wants its units: at most `points` own points each, and
/// whether a unit may run over several cells of a row (the GPU's blocks want
/// many own points more than they mind the neighbours of the whole run).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runs {
    pub points: u32,
    pub whole_rows: bool,
    /// How wide the cells are: the GPU's kernels walk 3^k cells as wide as
    /// the cutoff, the CPU's driver whatever ranges the host lists.
    pub cells: Cells,
}

/// The CPU's units: one cell's points, at most 256 of them, so that a dense
/// cell cannot stall one worker; cells finer than the cutoff where the
/// density allows.
pub const CPU_RUNS: Runs = Runs { points: 256, whole_rows: false, cells: Cells::Finer };

/// A row of cells next to a run's row: its offset over axes 1..k, whether
/// it is the own row, and the cells of it along axis 0 met on each side of
/// the run's own.
struct RowOffset {
    offset: [i64; MAX_AXES],
    own: bool,
    reach: i64,
}

/// The rows a run meets (as [`row_offsets`] lists them, the own row first),
/// by their offsets over axes 1 and 2: the GPU's grid builder takes them.
pub fn stencil_rows(k: usize, diagonal: bool, reach: u32) -> Vec<[i64; 2]> {
    row_offsets(k, diagonal, reach, Metric::Component, &[]).iter().map(|r| [r.offset[1], r.offset[2]]).collect()
}

/// The rows a run meets, those within `reach` of its own on axes 1..k: all
/// (2 reach + 1)^(k-1) of them, or with `diagonal` the own row and the rows
/// after it in row order (the last axis most significant), so that each
/// pair of neighbouring rows meets once. The own row comes first. Under a
/// Euclidean `metric`, only the cells of `axes` whose nearest points lie
/// within the grid's reach ([`ball_reach`]): rows beyond it are left out,
/// and each row meets fewer cells along axis 0 the farther it lies.
fn row_offsets(k: usize, diagonal: bool, reach: u32, metric: Metric, axes: &[Axis]) -> Vec<RowOffset> {
    let side = 2 * reach as usize + 1;
    let rows = side.pow(k.saturating_sub(1) as u32);
    let mut out: Vec<RowOffset> = (0..rows)
        .map(|mut r| {
            let mut offset = [0i64; MAX_AXES];
            for o in offset.iter_mut().take(k).skip(1) {
                *o = (r % side) as i64 - reach as i64;
                r /= side;
            }
            RowOffset { own: offset.iter().all(|&o| o == 0), offset, reach: reach as i64 }
        })
        .filter_map(|row| match metric {
            Metric::Component => Some(row),
            Metric::Euclidean => {
                let offset = row.offset;
                ball_reach(axes, &offset, reach).map(|reach| RowOffset { offset, own: row.own, reach })
            }
        })
        .filter(|row| {
            let after = row.offset.iter().rev().find(|&&o| o != 0).is_some_and(|&o| o > 0);
            !diagonal || row.own || after
        })
        .collect();
    out.sort_by_key(|row| !row.own);
    out
}

/// The cells along axis 0 that a row of cells at `offset` (axes 1..) meets on
/// each side of a cell, under a Euclidean cutoff: the most whose nearest
/// points lie within the grid's reach of the cell's (cells c and c + o lie at
/// least |o| - 1 cells apart on an axis), or None where no cell of the row
/// does. The reach is `reach` of the narrowest cells less [`REACH_MARGIN`]:
/// at least the cutoff and 2^-10 of it (`fit_axes`), so that a pair left out
/// lies past the cutoff by far more than its f32 value's rounding or a
/// point's placement in f64.
fn ball_reach(axes: &[Axis], offset: &[i64; MAX_AXES], reach: u32) -> Option<i64> {
    let Some(axis0) = axes.first() else { return Some(reach as i64) };
    let narrowest = axes.iter().map(|a| a.side).fold(f64::INFINITY, f64::min);
    let ball = (reach as f64 * narrowest * REACH_MARGIN).powi(2);
    let gap = |o: i64, side: f64| ((o.abs() - 1).max(0) as f64 * side).powi(2);
    let rest: f64 = axes.iter().zip(offset).skip(1).map(|(a, &o)| gap(o, a.side)).sum();
    (0..=reach as i64).rev().find(|&o| gap(o, axis0.side) + rest <= ball)
}

/// Sorts both sets into the cells of `axes` and lists each run's neighbours.
fn build(axes: Vec<Axis>, reach: u32, metric: Metric, inputs: &Inputs, visit: Visit, runs: Runs) -> Grid {
    let cells: usize = axes.iter().map(|a| a.cells as usize).product();
    let a = sort(&inputs.a, &axes, cells);
    let b = inputs.b.as_ref().map(|b| sort(b, &axes, cells));
    let diagonal = visit == Visit::LowerTriangle;
    let skip_self = visit == Visit::AllPairs;
    let other_start = &b.as_ref().unwrap_or(&a).cell_start;
    let k = axes.len();
    let n: Vec<i64> = axes.iter().map(|x| x.cells as i64).collect();
    let row_len = n.first().copied().unwrap_or(1);
    let rows = row_offsets(k, diagonal, reach, metric, &axes);

    // The runs of one row of cells, [x0, x1] at a time, with their ranges
    // (numbered from 0 in `ranges`).
    let row_units = |row: usize, (x_from, x_to): (i64, i64), units: &mut Vec<Unit>, ranges: &mut Vec<[u32; 2]>| {
        let mut coords = [0i64; MAX_AXES];
        let mut rest = row as i64;
        for (c, &len) in coords.iter_mut().zip(&n).skip(1) {
            *c = rest % len;
            rest /= len;
        }
        let row_start = row * row_len as usize;
        let mut x0 = x_from;
        while x0 < x_to {
            let cell = row_start + x0 as usize;
            let lo = a.cell_start[cell];
            if lo == a.cell_start[cell + 1] {
                x0 += 1;
                continue;
            }
            let mut x1 = x0;
            if runs.whole_rows {
                while x1 + 1 < row_len && a.cell_start[row_start + x1 as usize + 2] - lo <= runs.points {
                    x1 += 1;
                }
            }
            let hi = a.cell_start[row_start + x1 as usize + 1];
            let first = ranges.len() as u32;
            for row in &rows {
                push_row_runs(&coords, row, (x0, x1), &n, &axes, diagonal, other_start, ranges);
            }
            let mine = &ranges[first as usize..];
            let total: u64 = mine.iter().map(|r| (r[1] - r[0]) as u64).sum();
            let mut own = lo;
            while own < hi {
                let end = (own + runs.points).min(hi);
                let m = (end - own) as u64;
                let mut pairs = m * total;
                if diagonal {
                    // Own point i meets its row's points after i, not those from the row's start.
                    let row_lo = mine[0][0] as u64;
                    pairs -= (own as u64..end as u64).map(|i| i + 1 - row_lo).sum::<u64>();
                } else if skip_self {
                    pairs -= m;
                }
                units.push(Unit { own: [own, end], ranges: [first, ranges.len() as u32], pairs });
                own = end;
            }
            x0 = x1 + 1;
        }
    };
    // Segments of rows in parallel, each thread a band of them; the bands then
    // join in order. Runs over whole rows need a row to themselves; runs of
    // one cell let a long row (a 1-D grid is one row) split anywhere.
    let n_rows = cells / row_len as usize;
    let threads = crate::memory::host_cores();
    let piece = if runs.whole_rows { row_len } else { (cells.div_ceil(4 * threads) as i64).max(4096).min(row_len) };
    let segments: Vec<(usize, (i64, i64))> = (0..n_rows)
        .flat_map(|row| (0..row_len).step_by(piece as usize).map(move |x| (row, (x, (x + piece).min(row_len)))))
        .collect();
    let band = segments.len().div_ceil(threads).max(1);
    let bands: Vec<(Vec<Unit>, Vec<[u32; 2]>)> = std::thread::scope(|s| {
        let handles: Vec<_> = segments
            .chunks(band)
            .map(|chunk| {
                let row_units = &row_units;
                s.spawn(move || {
                    let (mut units, mut ranges) = (Vec::new(), Vec::new());
                    for &(row, xs) in chunk {
                        row_units(row, xs, &mut units, &mut ranges);
                    }
                    (units, ranges)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a grid band panicked")).collect()
    });
    let mut units = Vec::with_capacity(bands.iter().map(|b| b.0.len()).sum());
    let mut ranges = Vec::with_capacity(bands.iter().map(|b| b.1.len()).sum());
    for (band_units, band_ranges) in bands {
        let offset = ranges.len() as u32;
        units
            .extend(band_units.into_iter().map(|u| Unit { ranges: [u.ranges[0] + offset, u.ranges[1] + offset], ..u }));
        ranges.extend(band_ranges);
    }
    units.sort_unstable_by_key(|u| (std::cmp::Reverse(u.pairs), u.own[0]));
    let pairs = units.iter().map(|u| u.pairs as u128).sum();
    Grid { axes, reach, a, b, units, ranges, pairs }
}

/// Pushes the runs of sorted points of the other set in one row next to the
/// run of cells [x0, x1] of the row at `coords`: cells x0 - reach ..= x1 +
/// reach of that row (the row's reach; from x0 on in the own row with `diagonal`), one run,
/// or two where a periodic row wraps. Nothing where the row is past an open
/// edge. A periodic axis has at least 2 reach + 2 cells, so that no cell is
/// met twice.
#[allow(clippy::too_many_arguments)]
fn push_row_runs(
    coords: &[i64; MAX_AXES],
    row: &RowOffset,
    (x0, x1): (i64, i64),
    n: &[i64],
    axes: &[Axis],
    diagonal: bool,
    start: &[u32],
    out: &mut Vec<[u32; 2]>,
) {
    if axes.is_empty() {
        out.push([0, start[1]]);
        return;
    }
    let mut base = 0i64;
    let mut stride = n[0];
    for axis in 1..axes.len() {
        let mut c = coords[axis] + row.offset[axis];
        if axes[axis].periodic {
            c = c.rem_euclid(n[axis]);
        } else if !(0..n[axis]).contains(&c) {
            return;
        }
        base += c * stride;
        stride *= n[axis];
    }
    let at = |x: i64| start[(base + x) as usize];
    let (len, reach) = (n[0], row.reach);
    if diagonal && row.own {
        // The own row from the run on: a run meets the `reach` cells after
        // it, never those before (their runs meet it). Where the row wraps,
        // the pairs of its last cells and its first are met from the first
        // cells' runs: cells x0 - reach .. -1 of the row, wrapped, less any
        // the run already meets.
        let hi = (x1 + reach).min(len - 1);
        out.push([at(x0), at(hi + 1)]);
        let wrapped = (len - (reach - x0)).max(hi + 1);
        if axes[0].periodic && x0 < reach && wrapped < len {
            out.push([at(wrapped), at(len)]);
        }
        return;
    }
    let (lo, hi) = (x0 - reach, x1 + reach);
    if !axes[0].periodic {
        out.push([at(lo.max(0)), at(hi.min(len - 1) + 1)]);
    } else if hi - lo + 1 >= len {
        out.push([at(0), at(len)]);
    } else if lo < 0 {
        out.push([at(0), at(hi + 1)]);
        out.push([at(lo + len), at(len)]);
    } else if hi >= len {
        out.push([at(lo), at(len)]);
        out.push([at(0), at(hi - len + 1)]);
    } else {
        out.push([at(lo), at(hi + 1)]);
    }
}

/// `set` in cell order, by a stable counting sort. The cells of the points
/// and the sorted columns are made on every core; the counting sort itself
/// is one pass.
fn sort(set: &PointSet, axes: &[Axis], cells: usize) -> Sorted {
    let n = set.len();
    let threads = crate::memory::host_cores();
    let chunk = n.div_ceil(threads).max(1 << 16);
    let mut cell_of = vec![0u32; n];
    std::thread::scope(|s| {
        for (k, part) in cell_of.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let mut stride = 1u32;
                for axis in axes {
                    for (i, c) in part.iter_mut().enumerate() {
                        *c += axis.cell(axis.coordinate(set, k * chunk + i)) * stride;
                    }
                    stride *= axis.cells;
                }
            });
        }
    });
    let mut cell_start = vec![0u32; cells + 1];
    for &c in &cell_of {
        cell_start[c as usize + 1] += 1;
    }
    for c in 0..cells {
        cell_start[c + 1] += cell_start[c];
    }
    let mut next = cell_start.clone();
    let mut perm = vec![0u32; n];
    for (i, &c) in cell_of.iter().enumerate() {
        perm[next[c as usize] as usize] = i as u32;
        next[c as usize] += 1;
    }
    let columns = set.columns.iter().map(|c| c.gather(&perm, threads)).collect();
    let cell = perm.iter().map(|&i| cell_of[i as usize]).collect();
    Sorted {
        set: PointSet { columns, origin: format!("{} in cell order", set.origin), rows: None },
        perm,
        cell,
        cell_start,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_is_f64_floor_on_every_kind_of_value() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut values = vec![0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5e15, -2.5e15, 4.5e15, -4.5e15, 1e300, -1e300];
        values.extend([f64::INFINITY, f64::NEG_INFINITY, f64::MIN_POSITIVE, -f64::MIN_POSITIVE, 1e-310, -1e-310]);
        values.extend([
            (1u64 << 52) as f64 - 0.5,
            -((1u64 << 52) as f64 - 0.5),
            (1u64 << 53) as f64,
            -9.999_999_999_999_999e-1,
        ]);
        for _ in 0..100_000 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            values.push(f64::from_bits(state));
        }
        for x in values {
            let (ours, libm) = (floor(x), x.floor());
            assert!(
                ours.to_bits() == libm.to_bits() || (ours.is_nan() && libm.is_nan()) || (ours == 0.0 && libm == 0.0),
                "{x:e}: {ours:e} against {libm:e}"
            );
        }
    }
    use rand::{RngExt, SeedableRng};

    /// The sampled points of the other set in the cells within the layout's
    /// reach of each sampled query's, counted pair by pair: what the search
    /// of row runs must find.
    fn met_pair_by_pair(layout: &Layout, shapes: &Shapes, queries: usize) -> Vec<u64> {
        let cells = |set: &PointSet, i: usize| -> Vec<i64> {
            layout.axes.iter().map(|a| a.cell(a.coordinate(set, i)) as i64).collect()
        };
        let other = &shapes.other().sample;
        let others: Vec<Vec<i64>> = (0..other.len()).map(|j| cells(other, j)).collect();
        let narrowest = layout.axes.iter().map(|a| a.side).fold(f64::INFINITY, f64::min);
        let ball = (layout.reach as f64 * narrowest * REACH_MARGIN).powi(2);
        // Cells apart on each axis, the shorter way round on a periodic one.
        let apart = |a: &Axis, x: i64, y: i64| {
            let d = (x - y).abs();
            if a.periodic { d.min(a.cells as i64 - d) } else { d }
        };
        let a = &shapes.a.sample;
        // The queries `sampled_neighbours` takes: every so many of the sample.
        (0..a.len())
            .step_by(a.len().div_ceil(queries).max(1))
            .map(|i| {
                let c = cells(a, i);
                let near = |o: &Vec<i64>| {
                    let cube = layout
                        .axes
                        .iter()
                        .zip(c.iter().zip(o))
                        .all(|(a, (&x, &y))| apart(a, x, y) <= layout.reach as i64);
                    let gap = || -> f64 {
                        layout
                            .axes
                            .iter()
                            .zip(c.iter().zip(o))
                            .map(|(a, (&x, &y))| ((apart(a, x, y) - 1).max(0) as f64 * a.side).powi(2))
                            .sum()
                    };
                    cube && (layout.metric == Metric::Component || gap() <= ball)
                };
                others.iter().filter(|o| near(o)).count() as u64
            })
            .collect()
    }

    #[test]
    fn sampled_neighbours_count_what_pairs_of_cells_count() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        for ((dims, periodic, two_sets, reach), metric) in [
            (1, false, false, 1),
            (2, true, false, 1),
            (3, false, true, 1),
            (3, true, true, 1),
            (2, false, true, 1),
            (1, true, false, 3),
            (2, true, false, 2),
            (3, false, true, 2),
            (3, true, true, 3),
            (3, true, false, 4),
            (2, false, true, 4),
        ]
        .into_iter()
        .flat_map(|c| [(c, Metric::Component), (c, Metric::Euclidean)])
        {
            let set = |n: usize, rng: &mut rand::rngs::StdRng| PointSet {
                columns: (0..dims)
                    .map(|_| Column::F64((0..n).map(|_| rng.random::<f64>().powi(2)).collect()))
                    .collect(),
                origin: "random".into(),
                rows: None,
            };
            let inputs = Inputs { a: set(5_000, &mut rng), b: two_sets.then(|| set(3_000, &mut rng)) };
            // The fewest cells a reach allows on the first axis.
            let cells = [2 * reach + 2, 9, 23][..dims].to_vec();
            let axes: Vec<Axis> = cells
                .iter()
                .enumerate()
                .map(|(c, &n)| Axis {
                    component: c,
                    name: format!("x{c}"),
                    origin: 0.0,
                    side: 1.0 / n as f64,
                    cells: n,
                    periodic,
                    normal: None,
                })
                .collect();
            let layout = Layout {
                kind: IndexKind::Grid,
                cells: cells.iter().map(|&n| n as u64).product(),
                axes,
                reach,
                metric,
                cutoff: String::new(),
            };
            let shapes = Shapes::of(&inputs);
            // A few hundred queries against every sampled point: the
            // reference is quadratic, and every query is checked alike.
            let queries = 400;
            let (met, _) = layout.sampled_neighbours(&shapes, queries);
            let want = met_pair_by_pair(&layout, &shapes, queries);
            let wrong = (0..want.len()).find(|&q| met.get(q) != Some(&want[q]));
            assert!(
                met.len() == want.len() && wrong.is_none(),
                "{dims}-D, periodic {periodic}, two sets {two_sets}, reach {reach}, {metric:?}: sampled query {wrong:?} met {:?} points, not {:?}",
                wrong.map(|q| met.get(q)),
                wrong.map(|q| want[q])
            );
        }
    }

    /// Points in [0, 1)^dims that a grid of cells `side` wide for cutoff
    /// `value` must not lose: random ones, ones on cell boundaries (multiples
    /// of the side), pairs exactly `value` apart on an axis, duplicates, and
    /// points at 0 and just below 1 (pairs across a periodic box's edge).
    fn adversarial(n: usize, dims: usize, value: f64, side: f64, rng: &mut rand::rngs::StdRng) -> PointSet {
        let mut rows: Vec<Vec<f64>> = Vec::new();
        while rows.len() < n {
            let base: Vec<f64> = (0..dims)
                .map(|_| match rng.random_range(0..4u32) {
                    0 => (rng.random_range(0..(1.0 / side) as u32) as f64 * side).min(0.999),
                    1 => [0.0, 1.0 - 1e-9, 1.0 - value][rng.random_range(0..3usize)],
                    _ => rng.random::<f64>(),
                })
                .collect();
            let mut partner = base.clone();
            let axis = rng.random_range(0..dims);
            partner[axis] = (partner[axis] + value).min(1.0 - 1e-9);
            // And one `value` away in a random direction (a Euclidean cutoff's edge).
            let direction: Vec<f64> = (0..dims).map(|_| rng.random::<f64>() - 0.5).collect();
            let norm = direction.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-9);
            let slant: Vec<f64> =
                base.iter().zip(&direction).map(|(x, d)| (x + value * d / norm).clamp(0.0, 1.0 - 1e-9)).collect();
            rows.push(base.clone());
            rows.push(partner);
            rows.push(base);
            rows.push(slant);
        }
        rows.truncate(n);
        PointSet {
            columns: (0..dims).map(|d| Column::F64(rows.iter().map(|r| r[d]).collect())).collect(),
            origin: "adversarial".into(),
            rows: None,
        }
    }

    /// The pairs the grid's units visit, in input indices, each with the
    /// times it is visited (unordered for a lower triangle).
    fn visited(grid: &Grid, visit: Visit) -> std::collections::HashMap<(u32, u32), u32> {
        let mut seen = std::collections::HashMap::new();
        for u in &grid.units {
            for i in u.own[0]..u.own[1] {
                for r in u.ranges[0]..u.ranges[1] {
                    let [lo, hi] = grid.ranges[r as usize];
                    let lo = if visit == Visit::LowerTriangle && r == u.ranges[0] { i + 1 } else { lo };
                    for j in lo..hi {
                        if visit == Visit::AllPairs && j == i {
                            continue;
                        }
                        let (a, b) = (grid.a.perm[i as usize], grid.other().perm[j as usize]);
                        let key = if visit == Visit::LowerTriangle { (a.min(b), a.max(b)) } else { (a, b) };
                        *seen.entry(key).or_insert(0) += 1;
                    }
                }
            }
        }
        seen
    }

    #[test]
    fn finer_cells_visit_every_pair_within_the_cutoff_once() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        let value = 0.1;
        for reach in 1..=MAX_REACH {
            for (dims, periodic, visit) in [
                (3, true, Visit::LowerTriangle),
                (3, false, Visit::LowerTriangle),
                (2, true, Visit::AllPairs),
                (3, true, Visit::Cross),
                (1, true, Visit::LowerTriangle),
                (2, false, Visit::Cross),
            ] {
                let spans: Vec<Span> = (0..dims)
                    .map(|c| Span {
                        component: c,
                        name: format!("x{c}"),
                        integer: false,
                        origin: 0.0,
                        extent: 1.0,
                        length: periodic.then_some(1.0),
                        normal: None,
                        slack: 1.0 / ROUNDING,
                    })
                    .collect();
                let (axes, _) = fit_axes(value, &spans, 1 << 20, reach);
                assert_eq!(axes.len(), dims, "reach {reach}: every axis gets cells");
                let side = axes[0].side;
                let n = if dims == 1 { 400 } else { 1500 };
                let a = adversarial(n, dims, value, side, &mut rng);
                let b = (visit == Visit::Cross).then(|| adversarial(n / 2, dims, value, side, &mut rng));
                let inputs = Inputs { a, b };
                let runs = Runs { points: 5, whole_rows: reach % 2 == 0, cells: Cells::Finer };
                let mut visited_by = Vec::new();
                for metric in [Metric::Component, Metric::Euclidean] {
                    let grid = build(axes.clone(), reach, metric, &inputs, visit, runs);
                    let seen = visited(&grid, visit);
                    let what = format!("reach {reach}, {dims}-D, periodic {periodic}, {visit:?}, {metric:?}");
                    let twice = seen.iter().find(|(_, times)| **times > 1);
                    assert!(twice.is_none(), "{what}: pair {twice:?} visited more than once");
                    // Every pair within the cutoff on every axis, or in Euclidean
                    // distance (minimum images in a periodic box).
                    let other = inputs.other();
                    let near = |i: usize, j: usize| {
                        let apart = (0..dims).map(|d| {
                            let x = (inputs.a.columns[d].get_f64(i) - other.columns[d].get_f64(j)).abs();
                            if periodic { x.min(1.0 - x) } else { x }
                        });
                        match metric {
                            Metric::Component => apart.into_iter().all(|x| x <= value),
                            Metric::Euclidean => apart.map(|x| x * x).sum::<f64>() <= value * value,
                        }
                    };
                    let mut within = 0;
                    for i in 0..inputs.a.len() {
                        for j in 0..other.len() {
                            let counted = match visit {
                                Visit::LowerTriangle => i < j,
                                Visit::AllPairs => i != j,
                                Visit::Cross => true,
                            };
                            if counted && near(i, j) {
                                within += 1;
                                assert!(
                                    seen.contains_key(&(i as u32, j as u32)),
                                    "{what}: pair ({i}, {j}) within the cutoff not visited"
                                );
                            }
                        }
                    }
                    assert!(within > n, "{what}: only {within} pairs within the cutoff: the test proves little");
                    let listed: u64 = grid.units.iter().map(|u| u.pairs).sum();
                    assert_eq!(listed, seen.values().map(|&t| t as u64).sum::<u64>(), "{what}: the units' pair counts");
                    visited_by.push(listed);
                }
                // The ball leaves out corner cells from a reach of 3 in 3-D, of 4 in 2-D.
                if (reach >= 3 && dims == 3) || (reach >= 4 && dims == 2) {
                    assert!(visited_by[1] < visited_by[0], "reach {reach}, {dims}-D: the ball visits {visited_by:?}");
                }
            }
        }
    }

    /// Points in the triclinic box `b` (f32, as rdf reads them) that a grid
    /// in its fractional coordinates must not lose: random ones, ones on the
    /// faces of `faces` cells a side (fractional coordinates c / faces[k]),
    /// ones at 0 and just below 1, and partners `value` apart in a random
    /// direction, across the box's faces as often as not.
    fn in_triclinic_box(
        n: usize,
        b: &crate::spec::PeriodicBox,
        faces: [u32; 3],
        value: f64,
        rng: &mut rand::rngs::StdRng,
    ) -> PointSet {
        let mut rows: Vec<[f64; 3]> = Vec::new();
        while rows.len() < n {
            let s: [f64; 3] = [0, 1, 2].map(|k| match rng.random_range(0..4u32) {
                0 => rng.random_range(0..faces[k].max(1)) as f64 / faces[k].max(1) as f64,
                1 => [0.0, 1.0 - 1e-7][rng.random_range(0..2usize)],
                _ => rng.random::<f64>(),
            });
            let p = b.cartesian(s);
            let dir: [f64; 3] = [0, 1, 2].map(|_| rng.random::<f64>() - 0.5);
            let norm = dir.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-9);
            rows.push(p);
            rows.push([0, 1, 2].map(|k| p[k] + value * dir[k] / norm));
        }
        rows.truncate(n);
        PointSet {
            columns: (0..3).map(|d| Column::F32(rows.iter().map(|r| r[d] as f32).collect())).collect(),
            origin: "in a triclinic box".into(),
            rows: None,
        }
    }

    /// The distance of the nearest image of b to a, in f64, where it is at
    /// most half the box's least width: the image whose fractional
    /// separations lie in [-1/2, 1/2] (|s_k| <= |d| / w_k), or one next to
    /// it where rounding put a separation on 1/2.
    fn nearest_image(box_: &crate::spec::PeriodicBox, a: [f64; 3], b: [f64; 3]) -> f64 {
        let s = box_.fractional([0, 1, 2].map(|k| a[k] - b[k])).map(|x| x - x.round());
        let mut best = f64::INFINITY;
        for m in 0..27 {
            let m = [m % 3 - 1, m / 3 % 3 - 1, m / 9 - 1].map(|x| x as f64);
            let d = box_.cartesian([0, 1, 2].map(|k| s[k] + m[k]));
            best = best.min(d.iter().map(|x| x * x).sum::<f64>().sqrt());
        }
        best
    }

    #[test]
    fn triclinic_boxes_visit_every_pair_within_the_cutoff_once() {
        let seed: u64 = rand::rng().random();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for (t, text) in ["6,5,4,0.5,-0.3,0.25", "3,3,3,-0.9,0.7,0.6", "2,7,3,0.1,0,0"].into_iter().enumerate() {
            for (s, share) in [0.1, 0.25, 1.0 / 3.0, 0.5 * (1.0 - 1e-5)].into_iter().enumerate() {
                // One set or two, alternating: each box and share meets both.
                let sets = 1 + (t + s) % 2;
                let problem = crate::problems::built_in("rdf").unwrap().with_sets(sets).unwrap();
                let b = crate::spec::PeriodicBox::parse(crate::spec::Scalar::F32, text).unwrap();
                let r = (share * b.widths().into_iter().fold(f64::INFINITY, f64::min)) as f32;
                let params = problem.bind(&[format!("box={text}"), format!("r_max={r:?}")]).unwrap();
                let (_, b) = problem.periodic_box(&params).unwrap();
                let value = r as f64;
                let faces = b.widths().map(|w| (w / value).floor().max(1.0) as u32);
                let a = in_triclinic_box(400, &b, faces, value, &mut rng);
                let other = (sets == 2).then(|| in_triclinic_box(300, &b, faces.map(|f| 2 * f + 1), value, &mut rng));
                let inputs = Inputs { a, b: other };
                let other = inputs.other();
                let point = |set: &PointSet, i: usize| [0, 1, 2].map(|d| set.columns[d].get_f64(i));
                // Every pair (i, j) within the cutoff, either order for one set.
                let near: Vec<(usize, usize)> = (0..inputs.a.len())
                    .flat_map(|i| (0..other.len()).map(move |j| (i, j)))
                    .filter(|&(i, j)| {
                        (sets == 2 || i != j) && nearest_image(&b, point(&inputs.a, i), point(other, j)) <= value
                    })
                    .collect();
                // Enough pairs within the cutoff for the check to prove something (a
                // draw once had 200 or fewer of about 400 x 300).
                assert!(near.len() > 100, "box {text}, r_max {r}, seed {seed}: only {} pairs within it", near.len());
                let shapes = Shapes::of(&inputs);
                let visits: &[Visit] =
                    if sets == 1 { &[Visit::LowerTriangle, Visit::AllPairs] } else { &[Visit::Cross] };
                for (&visit, cells) in visits.iter().flat_map(|v| [(v, Cells::Widest), (v, Cells::Finer)]) {
                    let what = format!(
                        "box {text}, r_max {r} ({share:.4} of the least width), {visit:?}, {cells:?}, seed {seed}"
                    );
                    let Ok(Ok(layout)) = layout(&problem, &params, &shapes, 0, IndexChoice::Grid, cells) else {
                        panic!("{what}: no layout")
                    };
                    if share <= 0.25 {
                        assert!(!layout.axes.is_empty(), "{what}: no axis: {}", layout.cutoff);
                    }
                    assert!(layout.axes.iter().all(|a| a.normal.is_some()), "{what}: {:?}", layout.axes);
                    let runs = Runs { points: 5, whole_rows: layout.reach % 2 == 0, cells };
                    // rdf's cutoff is Euclidean, but a ball of cells needs orthogonal axes.
                    assert_eq!(layout.metric, Metric::Component, "{what}");
                    let grid = build(layout.axes.clone(), layout.reach, layout.metric, &inputs, visit, runs);
                    let seen = visited(&grid, visit);
                    let twice = seen.iter().find(|(_, times)| **times > 1);
                    assert!(twice.is_none(), "{what}: pair {twice:?} visited more than once");
                    for &(i, j) in &near {
                        let key = if visit == Visit::LowerTriangle { (i.min(j), i.max(j)) } else { (i, j) };
                        assert!(
                            seen.contains_key(&(key.0 as u32, key.1 as u32)),
                            "{what}: pair ({i}, {j}) within the cutoff not visited ({} cells, reach {})",
                            layout.cells,
                            layout.reach
                        );
                    }
                    let listed: u64 = grid.units.iter().map(|u| u.pairs).sum();
                    assert_eq!(listed, seen.values().map(|&t| t as u64).sum::<u64>(), "{what}: the units' pairs");
                }
            }
        }
    }

    fn uniform(n: usize, dims: usize, scale: f64, rng: &mut rand::rngs::StdRng) -> PointSet {
        PointSet {
            columns: (0..dims)
                .map(|_| Column::F32((0..n).map(|_| (scale * rng.random::<f64>()) as f32).collect()))
                .collect(),
            origin: "random".into(),
            rows: None,
        }
    }

    #[test]
    fn a_layout_without_axes_estimates_every_pair_instead_of_panicking() {
        // The crash of 8M-point SDH runs: a cutoff wider than the data gives
        // no axis, and a sample of its pairs was asked of axes[0].
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        let inputs = Shapes::of(&Inputs { a: uniform(3_001, 3, 1.0, &mut rng), b: None });
        let layout = Layout {
            kind: IndexKind::Grid,
            axes: Vec::new(),
            cells: 1,
            reach: 1,
            metric: Metric::Component,
            cutoff: String::new(),
        };
        let n = 3_001u128;
        assert_eq!(layout.estimated_pairs(&inputs, Visit::LowerTriangle), n * (n - 1) / 2);
        assert_eq!(layout.estimated_pairs(&inputs, Visit::AllPairs), n * (n - 1));
        let two = Shapes::of(&Inputs { a: uniform(700, 2, 1.0, &mut rng), b: Some(uniform(900, 2, 1.0, &mut rng)) });
        assert_eq!(layout.estimated_pairs(&two, Visit::Cross), 700 * 900);
        assert_eq!(layout.median_neighbours(&two), 900.0);
    }

    #[test]
    fn a_cutoff_as_wide_as_the_data_takes_every_pair_with_the_reason() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        let problem = crate::problems::built_in("2pcf").expect("2pcf");
        let inputs = Shapes::of(&Inputs { a: uniform(2_000, 3, 1.0, &mut rng), b: None });
        let all = 2_000u128 * 1_999 / 2;
        for r in ["0.5", "2", "1e30"] {
            let params = problem.bind(&[format!("r={r}")]).expect("params");
            let Ok(Err(brute)) = layout(&problem, &params, &inputs, all, IndexChoice::Auto, Cells::Widest) else {
                panic!("r = {r}: no grid expected")
            };
            assert!(brute.why.contains("fewer than 4 cells"), "r = {r}: {}", brute.why);
            // Forced, the grid is one cell, and its estimate is every pair.
            let Ok(Ok(one)) = layout(&problem, &params, &inputs, all, IndexChoice::Grid, Cells::Widest) else {
                panic!("r = {r}: --index grid is honoured with one cell")
            };
            assert!(one.axes.is_empty() && one.cells == 1);
            assert_eq!(one.estimated_pairs(&inputs, Visit::LowerTriangle), all);
        }
    }
}
