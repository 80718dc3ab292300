//! g(r) over the frames of a trajectory, in the conventions its users
//! already know: freud's `RDF` (pairs counted from each query point; the
//! density summed over frames, `exact` N_p N_q / V or `finite_size`
//! N_p (N_q - 1) / V) and MDAnalysis's `InterRDF` (ordered pairs and each
//! atom with itself unless an exclusion block leaves it out; the mean
//! volume over frames; `norm` "rdf", "density" or "none"). The counts come
//! from the engine's exact histogram of each frame (each pair once within
//! one set); everything here is the arithmetic that turns them into g(r).

use std::f64::consts::PI;

/// freud's `normalization_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FreudMode {
    /// N_p N_q / V.
    Exact,
    /// N_p (N_q - 1) / V: a point is not its own neighbour.
    FiniteSize,
}

/// MDAnalysis's `InterRDF(norm=...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MdaNorm {
    /// count / (frames x shell volume x N_A N_B / mean volume).
    Rdf,
    /// count / (frames x shell volume).
    Density,
    /// count / frames.
    None,
}

/// Whose g(r).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Convention {
    Freud(FreudMode),
    MdAnalysis(MdaNorm),
}

/// One frame as the engine counted it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameCounts<'a> {
    /// The histogram of pair separations: each pair once within one set.
    pub counts: &'a [u64],
    /// Whether the pairs were within one set (query points are the points).
    pub one_set: bool,
    /// Points, and query points (the same set within one).
    pub points: u64,
    pub queries: u64,
    /// The frame's volume.
    pub volume: f64,
    /// Ordered pairs (i, j) whose points share an excluded id (a molecule,
    /// an exclusion block), i == j included within one set; 0 without exclusion.
    pub excluded_ordered: u64,
    /// Whether the points' pairs with themselves (r = 0, within one set)
    /// are excluded anyway (an exclusion leaves them out).
    pub excluding: bool,
}

/// g(r) accumulated over frames.
#[derive(Debug, Clone, PartialEq)]
pub struct Rdf {
    pub convention: Convention,
    /// The buckets' edges, r_min to r_max.
    pub edges: Vec<f64>,
    /// Pairs per bucket, summed over frames, counted as the convention counts them.
    pub counts: Vec<u64>,
    pub frames: u64,
    /// freud: the sum over frames of each frame's pairs per unit volume.
    density: f64,
    /// freud: the query points over all frames.
    queries: u64,
    /// MDAnalysis: the sum of the frames' volumes, and the pairs N_A N_B
    /// less the excluded ones (of the last frame: MDAnalysis's atom groups keep their size).
    volume_sum: f64,
    pairs: f64,
}

impl Rdf {
    pub fn new(convention: Convention, edges: Vec<f64>) -> Rdf {
        let bins = edges.len().saturating_sub(1);
        Rdf {
            convention,
            edges,
            counts: vec![0; bins],
            frames: 0,
            density: 0.0,
            queries: 0,
            volume_sum: 0.0,
            pairs: 0.0,
        }
    }

    /// Adds one frame's histogram.
    pub fn add(&mut self, f: FrameCounts<'_>) {
        assert_eq!(f.counts.len(), self.counts.len(), "a frame's histogram has the accumulator's buckets");
        // Both conventions count a pair within one set from each end.
        let ends = if f.one_set { 2 } else { 1 };
        for (c, &k) in self.counts.iter_mut().zip(f.counts) {
            *c += ends * k;
        }
        // MDAnalysis counts each atom with itself at r = 0 unless its exclusion block leaves it out.
        let own = f.one_set && !f.excluding && self.convention.is_mdanalysis();
        if own && self.edges.first().is_some_and(|&lo| lo <= 0.0) && !self.counts.is_empty() {
            self.counts[0] += f.points;
        }
        let (p, q, x) = (f.points as f64, f.queries as f64, f.excluded_ordered as f64);
        match self.convention {
            Convention::Freud(mode) => {
                let finite = mode == FreudMode::FiniteSize;
                let mut pairs = p * if finite { q - 1.0 } else { q };
                if f.excluding {
                    // Within one set the points with themselves are out already where finite_size took them off.
                    pairs -= x - if finite && f.one_set { p } else { 0.0 };
                }
                self.density += pairs / f.volume;
                self.queries += f.queries;
            }
            Convention::MdAnalysis(_) => {
                self.volume_sum += f.volume;
                self.pairs = p * q - if f.excluding { x } else { 0.0 };
            }
        }
        self.frames += 1;
    }

    /// Each bucket's centre.
    pub fn centers(&self) -> Vec<f64> {
        self.edges.windows(2).map(|e| (e[0] + e[1]) / 2.0).collect()
    }

    /// Each bucket's shell volume, 4/3 pi (r_hi^3 - r_lo^3).
    pub fn shells(&self) -> Vec<f64> {
        crate::xi::shell_volumes(&self.edges)
    }

    /// g(r) (or the density, or the mean count, as MDAnalysis's `norm` says).
    pub fn rdf(&self) -> Vec<f64> {
        let shells = self.shells();
        let frames = self.frames as f64;
        self.counts
            .iter()
            .zip(shells)
            .map(|(&c, shell)| {
                let c = c as f64;
                match self.convention {
                    Convention::Freud(_) => c / (self.density * shell),
                    Convention::MdAnalysis(MdaNorm::None) => c / frames,
                    Convention::MdAnalysis(MdaNorm::Density) => c / (frames * shell),
                    Convention::MdAnalysis(MdaNorm::Rdf) => {
                        let mean_volume = self.volume_sum / frames;
                        c / (frames * shell * self.pairs / mean_volume)
                    }
                }
            })
            .collect()
    }

    /// freud's `n_r`: the mean number of points within each bucket's outer
    /// edge of a query point.
    pub fn n_r(&self) -> Vec<f64> {
        let mut total = 0u64;
        self.counts
            .iter()
            .map(|&c| {
                total += c;
                total as f64 / self.queries as f64
            })
            .collect()
    }
}

/// MDAnalysis's `InterRDF_s`: what each bucket's count of one atom pair,
/// summed over frames of these `volumes`, is divided by under `norm`: the
/// frames (none), times the shell's volume (density), over the mean volume
/// (rdf: one pair's density; a frame without a box has volume 0, and g(r)
/// is then 0, as MDAnalysis's division by its infinite norm gives).
pub fn site_divisors(norm: MdaNorm, edges: &[f64], volumes: &[f64]) -> Vec<f64> {
    let frames = volumes.len() as f64;
    let mean_volume = volumes.iter().sum::<f64>() / frames;
    crate::xi::shell_volumes(edges)
        .into_iter()
        .map(|shell| match norm {
            MdaNorm::None => frames,
            MdaNorm::Density => frames * shell,
            MdaNorm::Rdf => frames * shell / mean_volume,
        })
        .collect()
}

impl Convention {
    fn is_mdanalysis(self) -> bool {
        matches!(self, Convention::MdAnalysis(_))
    }
}

/// 4/3 pi r^3, the volume a shell's edges bound.
pub fn ball(r: f64) -> f64 {
    4.0 / 3.0 * PI * r.powi(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ideal_gas_frame_gives_one_in_each_convention() {
        // 1000 points in a box of 1000: a pair density such that a shell's count is its ideal count.
        let edges = vec![1.0, 2.0, 3.0];
        let (n, v) = (1000u64, 1000.0);
        let ideal = |lo: f64, hi: f64| (n * (n - 1)) as f64 / 2.0 / v * (ball(hi) - ball(lo));
        let counts = [ideal(1.0, 2.0).round() as u64, ideal(2.0, 3.0).round() as u64];
        let frame = FrameCounts {
            counts: &counts,
            one_set: true,
            points: n,
            queries: n,
            volume: v,
            excluded_ordered: 0,
            excluding: false,
        };
        for convention in [Convention::Freud(FreudMode::FiniteSize), Convention::MdAnalysis(MdaNorm::Rdf)] {
            let mut rdf = Rdf::new(convention, edges.clone());
            rdf.add(frame);
            rdf.add(frame);
            for g in rdf.rdf() {
                let want = if convention.is_mdanalysis() { (n - 1) as f64 / n as f64 } else { 1.0 };
                assert!((g - want).abs() < 2e-3, "{convention:?}: {g} against {want}");
            }
            assert_eq!(rdf.counts, counts.map(|c| 4 * c), "two frames, each pair from both ends");
        }
    }
}
