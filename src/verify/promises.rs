//! The promise check: a spec's promises (its cutoff, its key map) sampled
//! before a run relies on them. Random pairs of the data, and sampled
//! points each paired with copies of themselves moved just past the cutoff
//! (the pairs a grid skips first) along each covered component, are
//! evaluated alone in the run's arithmetic. A pair past the cutoff must add
//! nothing (a KNN value be at least the separation in every covered
//! component), and with a key map every value must be map(key) bit for bit,
//! the map non-decreasing over the keys met. A broken promise is an error
//! naming the pair.

use rand::{RngExt, SeedableRng};

use super::VerifyError;
use crate::backend::cpu::{Alone, CpuDriver};
use crate::cache::Cache;
use crate::data::{Inputs, PointSet, short};
use crate::index::IndexKind;
use crate::plan::{Points, Shape};
use crate::spec::{Cutoff, CutoffOver, Element, KeyMap, Metric, Params, PeriodicBox, Problem};

/// Random pairs of the data the promise check evaluates.
const PROMISE_PAIRS: usize = 4096;
/// Points each moved a little past the cutoff, along each covered component.
const PROMISE_POINTS: usize = 256;
/// A pair's value may fall below its separation by rounding: a few units in
/// the last place of the value, and of the coordinates it is a difference
/// of (a minimum image in a box of length 1 loses the digits of 1). Below it
/// by more than this share of both, the promise is broken.
const KNN_SLACK: f64 = 1.0 / (1u64 << 20) as f64;

/// The promises a run relies on: `cutoff` where it may walk a grid, `key`
/// where the spec declares a key map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promises {
    pub cutoff: bool,
    pub key: bool,
}

/// Samples `problem`'s promises on `inputs` (see the module); returns what
/// was checked, or the broken promise with a pair that breaks it.
pub fn promises(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    check: Promises,
    f64_mode: bool,
    cache: &Cache,
) -> Result<String, VerifyError> {
    let space = Space::of(problem, params, inputs, check);
    let kept_before = Kept::of(&space, check, f64_mode, cache);
    if let Some(note) = kept_before.as_ref().and_then(Kept::recall) {
        return Ok(format!("{}: {note}", problem.origin));
    }
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut probes = space.random_pairs(&mut rng);
    let real = probes.len();
    if space.cutoff.is_some() {
        probes.extend(space.moved_points(&mut rng));
    }
    let sample = Sample::evaluate(&space, probes, real, f64_mode, cache)?;
    let mut kept = Vec::new();
    if let Some(cutoff) = space.cutoff {
        let far = sample.check_cutoff(cutoff)?;
        kept.push(match space.value {
            Some(_) => format!("{far} pairs past the cutoff add nothing"),
            None => format!("{far} values are at least their separations"),
        });
    }
    if let Some(key) = problem.function.key.as_ref().filter(|_| check.key) {
        sample.check_key(key)?;
        kept.push(format!("{} values are the map of their keys, which never decreases", sample.probes.len()));
    }
    let kept = kept.join("; ");
    if let Some(k) = kept_before {
        k.keep(seed, &kept);
    }
    Ok(format!("{}: its promises hold on a sample (seed {seed}): {kept}", problem.origin))
}

/// A promise check that held, remembered in the cache of compiled code
/// under what it checked, as the compiled code is: the problem and its
/// parameters wherever its files lie (not their paths), the promises, the
/// arithmetic, and the shape of the data it sampled (sets, their sizes
/// and the covered components' extents to a power of two, the box). A run
/// of the same spec on data of that shape, from any folder, need not sample again.
struct Kept {
    entry: crate::cache::Entry,
}

/// Changes when the check changes, so that what an older check kept is checked again.
const CHECK_VERSION: &[u8] = b"promise check 2";

impl Kept {
    fn of(space: &Space, check: Promises, f64_mode: bool, cache: &Cache) -> Option<Kept> {
        let mut problem = space.problem.clone();
        problem.origin.clear();
        problem.function.file.clear();
        problem.params.iter_mut().for_each(|p| p.default_at.clear());
        // A power of two: data of the same extent and size to a factor of two.
        let exponent = |x: f64| if x > 0.0 && x.is_finite() { x.log2().floor() as i64 } else { i64::MIN };
        let inputs = space.inputs;
        let sizes: Vec<i64> =
            std::iter::once(&inputs.a).chain(inputs.b.as_ref()).map(|s| exponent(s.len() as f64)).collect();
        let shape = format!(
            "sizes {sizes:?}, extents {:?}, scale {}, box {:?} {:?}",
            space.extent.iter().map(|&e| exponent(e)).collect::<Vec<_>>(),
            exponent(space.scale),
            space.lengths,
            space.tilted
        );
        let key = crate::cache::Key::of(&[
            CHECK_VERSION,
            format!("{problem:?}").as_bytes(),
            format!("{:?}", space.params).as_bytes(),
            format!("{check:?} {f64_mode}").as_bytes(),
            shape.as_bytes(),
        ]);
        cache.entry("promises", &problem.name, key, "kept").ok().map(|entry| Kept { entry })
    }

    /// What the check said when it held, where it held before.
    fn recall(&self) -> Option<String> {
        let text = String::from_utf8(self.entry.read().ok()?).ok()?;
        let (seed, kept) = text.split_once('\n')?;
        Some(format!(
            "its promises hold on a sample (seed {seed}) of data of this shape, remembered from an earlier run: {kept}"
        ))
    }

    /// Remembers that the check held (its seed, and what held); where the
    /// cache cannot take it, the next run samples again.
    fn keep(&self, seed: u64, kept: &str) {
        let _ = self.entry.write(format!("{seed}\n{kept}").as_bytes());
    }
}

/// One evaluated pair: which points, and how far apart in each covered
/// component (the minimum image's, in a periodic box).
struct Probe {
    /// Row of set A.
    own: usize,
    partner: Partner,
    /// The separation along each covered component.
    apart: Vec<f64>,
}

enum Partner {
    /// Row of the other set.
    Row(usize),
    /// Row `own` of set A moved by `by[k]` along covered component k.
    Moved { by: Vec<f64> },
}

/// Where the promises are checked: the problem, the inputs, the components
/// the cutoff covers with their extents, and the box.
struct Space<'a> {
    problem: &'a Problem,
    params: &'a Params,
    inputs: &'a Inputs,
    cutoff: Option<&'a Cutoff>,
    /// The cutoff's value (None for KNN's `<cutoff/>`).
    value: Option<f64>,
    /// Covered components, and the extent of each over both sets.
    over: Vec<usize>,
    extent: Vec<f64>,
    /// A periodic box's lengths.
    lengths: Option<[f64; 3]>,
    /// A triclinic box: there the grid's axes for x, y and z lie along the
    /// faces' normals (`index::layout`), and so do the separations here.
    tilted: Option<PeriodicBox>,
    /// The largest coordinate (or box length) of a covered component: the
    /// scale of a separation's rounding.
    scale: f64,
}

impl<'a> Space<'a> {
    fn of(problem: &'a Problem, params: &'a Params, inputs: &'a Inputs, check: Promises) -> Space<'a> {
        let cutoff = problem.cutoff.as_ref().filter(|_| check.cutoff);
        let components = problem.input.components();
        let over: Vec<usize> = match (cutoff.map(|c| &c.over), &problem.input.element) {
            (None, _) => Vec::new(),
            (Some(CutoffOver::Coordinates), Element::Vector { dims, .. }) => (0..*dims as usize).collect(),
            (Some(CutoffOver::Coordinates), Element::Record { .. }) => {
                unreachable!("the spec reader asks records for `over`")
            }
            (Some(CutoffOver::Fields(names)), _) => names
                .iter()
                .map(|n| components.iter().position(|c| &c.name == n).expect("the spec reader checked the names"))
                .collect(),
        };
        let lengths: Option<[f64; 3]> = problem.periodic_box(params).map(|(_, b)| b.lengths);
        let tilted = problem.periodic_box(params).map(|(_, b)| b).filter(|b| b.is_triclinic());
        let sets: Vec<&PointSet> = std::iter::once(&inputs.a).chain(inputs.b.as_ref()).collect();
        let range = |c: usize| {
            sets.iter()
                .map(|s| s.columns[c].min_max())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), (a, b)| (l.min(a), h.max(b)))
        };
        let ranges: Vec<(f64, f64)> = over.iter().map(|&c| range(c)).collect();
        let extent = ranges.iter().map(|(lo, hi)| hi - lo).collect();
        let scale = over
            .iter()
            .zip(&ranges)
            .map(|(&c, (lo, hi))| lengths.filter(|_| c < 3).map_or(0.0, |l| l[c]).max(lo.abs()).max(hi.abs()))
            .fold(0.0, f64::max);
        let value = cutoff.and_then(|c| c.value.as_ref()).map(|v| params.eval(v).as_f64());
        // A triclinic grid's axes wrap at the faces' widths, not the lengths.
        let extent = match tilted {
            Some(b) => over.iter().zip(extent).map(|(&c, e)| if c < 3 { b.widths()[c] } else { e }).collect(),
            None => extent,
        };
        Space { problem, params, inputs, cutoff, value, over, extent, lengths, tilted, scale }
    }

    /// The separation of two points (every component's value) along each
    /// covered component, the minimum image's in a box; in a triclinic box
    /// x, y and z give way to the distance along each pair of faces' normal
    /// (fractional coordinate k, wrapped, times width k): no image of the
    /// pair is nearer than that along it, and the grid's cells lie so.
    fn apart(&self, x: &[f64], y: &[f64]) -> Vec<f64> {
        let along_normals = self.tilted.map(|b| {
            let s = b.fractional([0, 1, 2].map(|c| x[c] - y[c]));
            let w = b.widths();
            [0, 1, 2].map(|c| (s[c] - s[c].round()).abs() * w[c])
        });
        self.over
            .iter()
            .map(|&c| {
                let d = x[c] - y[c];
                match (along_normals, self.lengths) {
                    (Some(n), _) if c < 3 => n[c],
                    (None, Some(l)) if c < 3 => (d - l[c] * (d / l[c]).round()).abs(),
                    _ => d.abs(),
                }
            })
            .collect()
    }

    /// Row `i` of `set`: every component's value (the separations need x,
    /// y and z together in a triclinic box).
    fn row(&self, set: &PointSet, i: usize) -> Vec<f64> {
        (0..self.problem.input.components().len()).map(|c| set.columns[c].get_f64(i)).collect()
    }

    /// Whether a Euclidean cutoff's ball is what the grid relies on: not in
    /// a triclinic box, whose grid keeps to the component promise (its
    /// normals are not orthogonal, so their separations bound no distance
    /// summed as squares).
    fn ball(&self) -> bool {
        self.cutoff.is_some_and(|c| c.metric == Metric::Euclidean) && self.tilted.is_none()
    }

    /// Past this in covered component k a grid may skip the pair
    /// (`index::fit_axes`'s least cell width).
    fn least(&self, k: usize) -> f64 {
        let v = self.value.unwrap_or(0.0);
        if self.problem.input.components()[self.over[k]].scalar.is_integer() {
            v.floor() + 1.0
        } else {
            v * (1.0 + 1.0 / 1024.0) + self.extent[k] / (1u64 << 20) as f64
        }
    }

    /// Random pairs of the data (a point never with itself).
    fn random_pairs(&self, rng: &mut impl rand::Rng) -> Vec<Probe> {
        let (a, other) = (&self.inputs.a, self.inputs.other());
        let one_set = self.inputs.b.is_none();
        (0..PROMISE_PAIRS)
            .filter_map(|_| {
                let (i, j) = (rng.random_range(0..a.len()), rng.random_range(0..other.len()));
                let apart = self.apart(&self.row(a, i), &self.row(other, j));
                (!(one_set && i == j)).then_some(Probe { own: i, partner: Partner::Row(j), apart })
            })
            .collect()
    }

    /// Sampled points each paired with copies of themselves moved along each
    /// covered component: just past the grid's reach, then farther (for KNN,
    /// a spread of scales), and nearly the data's extent (a function that
    /// wraps its space without declaring a periodic box finds such a pair close).
    fn moved_points(&self, rng: &mut impl rand::Rng) -> Vec<Probe> {
        let a = &self.inputs.a;
        let mut probes = Vec::new();
        for _ in 0..PROMISE_POINTS.min(a.len()) {
            let i = rng.random_range(0..a.len());
            for (k, &c) in self.over.iter().enumerate() {
                let steps: Vec<f64> = match self.value {
                    Some(_) => [1.0 + 1.0 / 256.0, 1.5, 3.0]
                        .iter()
                        .map(|f| f * self.least(k))
                        .chain([self.extent[k] - self.least(k) / 2.0])
                        .collect(),
                    None => [1.0 / 1024.0, 1.0 / 64.0, 0.25, 1.0 - 1.0 / 1024.0]
                        .iter()
                        .map(|f| f * self.extent[k])
                        .collect(),
                };
                for by in steps.into_iter().flat_map(|s| [s, -s]) {
                    let x = a.columns[c].get_f64(i);
                    let mut moved = a.columns[c].clone_row(i);
                    moved.set_f64(0, x + by);
                    let own = self.row(a, i);
                    let mut there = own.clone();
                    there[c] = moved.get_f64(0);
                    let apart = self.apart(&there, &own);
                    let d = apart[k];
                    let half = match self.tilted {
                        // The separations along the normals are the wrapped ones already.
                        Some(_) => f64::INFINITY,
                        None => self.lengths.filter(|_| c < 3).map_or(f64::INFINITY, |l| l[c] / 2.0),
                    };
                    // Rounding may have moved it less; a box's far half is nearer again.
                    let past = match self.tilted {
                        Some(_) => self.past_cutoff(&apart),
                        None => d > self.least(k),
                    };
                    if apart.iter().any(|d| d.is_nan()) || d <= 0.0 || (self.value.is_some() && !past) || d >= half {
                        continue;
                    }
                    let apart = match self.tilted {
                        Some(_) => apart,
                        None => (0..self.over.len()).map(|j| if j == k { d } else { 0.0 }).collect(),
                    };
                    let mut moves = vec![0.0; self.over.len()];
                    moves[k] = moved.get_f64(0) - x;
                    probes.push(Probe { own: i, partner: Partner::Moved { by: moves }, apart });
                }
            }
            if self.ball() {
                probes.extend(self.slanted(i, rng));
            }
        }
        probes
    }

    /// Point `i` paired with copies of itself moved in random directions
    /// over every covered component, just past the largest reach of the
    /// grid in Euclidean distance and 1.5 times it: under a Euclidean
    /// cutoff a grid skips such pairs, though no one component is past it.
    fn slanted(&self, i: usize, rng: &mut impl rand::Rng) -> Vec<Probe> {
        let a = &self.inputs.a;
        let least = (0..self.over.len()).map(|k| self.least(k)).fold(0.0, f64::max);
        let mut probes = Vec::new();
        for f in [1.0 + 1.0 / 256.0, 1.5] {
            for _ in 0..4 {
                let direction: Vec<f64> = self.over.iter().map(|_| rng.random::<f64>() - 0.5).collect();
                let norm = direction.iter().map(|x| x * x).sum::<f64>().sqrt();
                if norm == 0.0 {
                    continue;
                }
                let mut moves = Vec::new();
                let own = self.row(a, i);
                let mut there = own.clone();
                for (k, &c) in self.over.iter().enumerate() {
                    let x = a.columns[c].get_f64(i);
                    let mut moved = a.columns[c].clone_row(i);
                    moved.set_f64(0, x + f * least * direction[k] / norm);
                    moves.push(moved.get_f64(0) - x);
                    there[c] = moved.get_f64(0);
                }
                let apart = self.apart(&there, &own);
                // Rounding may have moved it less; a box's far half is nearer again.
                let past = apart.iter().map(|d| d * d).sum::<f64>().sqrt() > least;
                let halves =
                    self.over.iter().zip(&moves).all(|(&c, by)| {
                        by.abs() < self.lengths.filter(|_| c < 3).map_or(f64::INFINITY, |l| l[c] / 2.0)
                    });
                if past && halves && apart.iter().all(|d| d.is_finite()) {
                    probes.push(Probe { own: i, partner: Partner::Moved { by: moves }, apart });
                }
            }
        }
        probes
    }

    /// Whether the pair `apart` lies past the cutoff by the grid's margin:
    /// in one component, or under a Euclidean cutoff in the norm of all.
    fn past_cutoff(&self, apart: &[f64]) -> bool {
        let one = apart.iter().enumerate().any(|(k, &d)| d > self.least(k));
        let least = (0..self.over.len()).map(|k| self.least(k)).fold(0.0, f64::max);
        one || (self.ball() && apart.iter().map(|d| d * d).sum::<f64>().sqrt() > least)
    }
}

/// The probes evaluated alone in the run's arithmetic, with the points they were made of.
struct Sample<'a> {
    space: &'a Space<'a>,
    probes: Vec<Probe>,
    /// Probes [0, real) pair rows of the data; the rest moved copies.
    real: usize,
    own: PointSet,
    partners: PointSet,
    moved: PointSet,
    alone: Alone,
}

impl<'a> Sample<'a> {
    /// The real pairs against the other set, the moved ones against copies of set A's rows.
    fn evaluate(
        space: &'a Space<'a>,
        probes: Vec<Probe>,
        real: usize,
        f64_mode: bool,
        cache: &Cache,
    ) -> Result<Sample<'a>, VerifyError> {
        let (problem, inputs) = (space.problem, space.inputs);
        let points = Points { a: inputs.a.len() as u64, b: inputs.b.as_ref().map(|b| b.len() as u64) };
        let shape = Shape::new(problem, space.params, points);
        let driver = CpuDriver::compile(problem, space.params, &shape, IndexKind::None, f64_mode, cache)?;
        let own_rows: Vec<usize> = probes.iter().map(|p| p.own).collect();
        let own = inputs.a.subset(&own_rows, "sampled".into());
        let partner_rows: Vec<usize> = probes
            .iter()
            .map(|p| match p.partner {
                Partner::Row(j) => j,
                Partner::Moved { .. } => p.own,
            })
            .collect();
        let mut moved = inputs.a.subset(&partner_rows[real..], "moved".into());
        for (m, p) in probes[real..].iter().enumerate() {
            let Partner::Moved { by } = &p.partner else { unreachable!("real pairs come first") };
            for (&c, &by) in space.over.iter().zip(by).filter(|(_, by)| **by != 0.0) {
                let x = moved.columns[c].get_f64(m);
                moved.columns[c].set_f64(m, x + by);
            }
        }
        // A copy shares its point's ids: with <exclude> it would add nothing for
        // that alone, whatever its distance. The copy takes another id.
        if let Some(id) = &problem.exclude {
            let k = problem.input.components().iter().position(|c| &c.name == id).expect("the id is a component");
            if let crate::data::Column::I32(v) = &mut moved.columns[k] {
                v.iter_mut().for_each(|x| *x = !*x);
            }
        }
        let partners = inputs.other().subset(&partner_rows[..real], "sampled".into());
        let pairs = |from: usize, count: usize| -> Vec<[u32; 2]> {
            (0..count).map(|m| [(from + m) as u32, m as u32]).collect()
        };
        let mut alone = driver.pairs_alone(&own, &partners, &pairs(0, real));
        let more = driver.pairs_alone(&own, &moved, &pairs(real, probes.len() - real));
        alone.value.extend(more.value);
        alone.adds.extend(more.adds);
        alone.key.extend(more.key);
        alone.mapped.extend(more.mapped);
        alone.same.extend(more.same);
        Ok(Sample { space, probes, real, own, partners, moved, alone })
    }

    /// The pair function that breaks a promise, and its snippet's file
    /// (a promise is the spec's; the snippet may be what broke it).
    fn function(&self) -> String {
        let f = &self.space.problem.function;
        format!("{} ({})", f.name, f.file)
    }

    /// Pair m: its rows, points and separation.
    fn describe(&self, m: usize) -> String {
        let (space, p) = (self.space, &self.probes[m]);
        let components = space.problem.input.components();
        let point = |s: &PointSet, i: usize| -> String {
            format!("({})", s.columns.iter().take(components.len()).map(|c| c.show(i)).collect::<Vec<_>>().join(", "))
        };
        let (a, other) = (&space.inputs.a, space.inputs.other());
        let own = format!("row {} of {} {}", a.original_row(p.own as u64), a.origin, point(&self.own, m));
        let partner = match &p.partner {
            Partner::Row(j) => {
                format!("row {} of {} {}", other.original_row(*j as u64), other.origin, point(&self.partners, m))
            }
            Partner::Moved { by } => format!(
                "the same point moved by {} to {}",
                space
                    .over
                    .iter()
                    .zip(by)
                    .filter(|(_, by)| **by != 0.0)
                    .map(|(&c, &by)| format!("{} along {}", short(by), components[c].name))
                    .collect::<Vec<_>>()
                    .join(", "),
                point(&self.moved, m - self.real)
            ),
        };
        if space.over.is_empty() {
            return format!("{own} and {partner}");
        }
        let far = p
            .apart
            .iter()
            .enumerate()
            .map(|(k, d)| match (space.tilted, space.over[k]) {
                (Some(_), c) if c < 3 => format!(
                    "{}' {} (along the normal of faces {})",
                    components[c].name,
                    short(*d),
                    ["yz", "zx", "xy"][c]
                ),
                (_, c) => format!("{} {}", components[c].name, short(*d)),
            })
            .collect::<Vec<_>>()
            .join(", ");
        format!("{own} and {partner} (apart: {far})")
    }

    /// Pairs past the cutoff add nothing (KNN: a value is at least the
    /// separation in each covered component); returns how many were checked.
    fn check_cutoff(&self, cutoff: &Cutoff) -> Result<usize, VerifyError> {
        let space = self.space;
        let (spec, alone) = (&space.problem.origin, &self.alone);
        let mut far = 0;
        for (m, p) in self.probes.iter().enumerate() {
            match space.value {
                Some(_) => {
                    if !space.past_cutoff(&p.apart) {
                        continue;
                    }
                    far += 1;
                    if alone.adds[m] {
                        let apart = match (cutoff.metric, space.tilted) {
                            (_, Some(_)) => "along a normal of the box's faces (or in a component past x, y, z)",
                            (Metric::Component, None) => "in a component",
                            (Metric::Euclidean, None) => "in Euclidean distance (metric=\"euclidean\")",
                        };
                        return Err(VerifyError::BrokenPromise(format!(
                            "{spec}: its cutoff {} promises that a pair farther apart than that {apart} adds nothing, but under {} {} adds to the output (its value {}); a grid would leave such pairs out. Fix the cutoff or the pair function, or run every pair ({})",
                            space.params.describe(cutoff.value.as_ref().expect("a value")),
                            self.function(),
                            self.describe(m),
                            short(alone.value[m]),
                            crate::remedy::Remedy::EveryPair
                        )));
                    }
                }
                None => {
                    let reach = p.apart.iter().copied().fold(0.0, f64::max);
                    far += 1;
                    if alone.value[m] < reach - KNN_SLACK * (reach + space.scale) {
                        return Err(VerifyError::BrokenPromise(format!(
                            "{spec}: <cutoff/> promises that a pair's value is at least its separation in each component, but under {} {} has the value {}, below {}; a search of rings would stop too soon. Fix the pair function, or search every pair ({})",
                            self.function(),
                            self.describe(m),
                            alone.value[m],
                            short(reach),
                            crate::remedy::Remedy::EveryPair
                        )));
                    }
                }
            }
        }
        Ok(far)
    }

    /// Every value is map(key) bit for bit, and the map never decreases over the keys met.
    fn check_key(&self, k: &KeyMap) -> Result<(), VerifyError> {
        let (problem, alone) = (self.space.problem, &self.alone);
        let spec = &problem.origin;
        if let Some(m) = (0..self.probes.len()).find(|&m| !alone.same[m]) {
            return Err(VerifyError::BrokenPromise(format!(
                "{spec}: key=\"{}\" map=\"{}\" promise that {}(a, b) is {}({}(a, b)) bit for bit, but for {} the value of {} is {} and the map of the key {} is {}. Fix the key or the map, or drop them",
                k.key,
                k.map,
                problem.function.name,
                k.map,
                k.key,
                self.describe(m),
                self.function(),
                alone.value[m],
                alone.key[m],
                alone.mapped[m]
            )));
        }
        let mut order: Vec<usize> = (0..self.probes.len()).filter(|&m| !alone.key[m].is_nan()).collect();
        order.sort_by(|&x, &y| alone.key[x].total_cmp(&alone.key[y]));
        if let Some(w) =
            order.windows(2).find(|w| alone.key[w[0]] < alone.key[w[1]] && alone.mapped[w[0]] > alone.mapped[w[1]])
        {
            return Err(VerifyError::BrokenPromise(format!(
                "{spec}: map=\"{}\" must not decrease, but the key {} of {} maps to {}, more than the map {} of the larger key {} of {}. Fix the map, or drop key and map",
                k.map,
                alone.key[w[0]],
                self.describe(w[0]),
                alone.mapped[w[0]],
                alone.mapped[w[1]],
                alone.key[w[1]],
                self.describe(w[1])
            )));
        }
        Ok(())
    }
}
