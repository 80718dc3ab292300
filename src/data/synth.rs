//! Synthetic point sets with a seed, as in the seed papers' experiments.

use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, Normal};

use super::{Column, InputError, PointSet};
use crate::input_error;
use crate::spec::{Component, Scalar};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generator {
    /// Every coordinate uniform in [0, 1).
    Uniform,
    /// 16 Gaussian clusters (sigma 0.02) at uniform centres, clipped to [0, 1).
    Clustered,
    /// Every coordinate exponential with lambda = 40, clipped to [0, 1): the
    /// skewed "Expo" datasets of the self-join papers.
    Exponential,
}

impl Generator {
    pub fn parse(name: &str) -> Option<Generator> {
        Some(match name {
            "uniform" => Generator::Uniform,
            "clustered" => Generator::Clustered,
            "exponential" => Generator::Exponential,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Generator::Uniform => "uniform",
            Generator::Clustered => "clustered",
            Generator::Exponential => "exponential",
        }
    }
}

/// `n` points of `components`. Float components lie in [0, 1); integer
/// components are uniform in [0, n) so that a band join on them is selective.
pub fn synthesize(generator: Generator, n: u64, components: &[Component], seed: u64) -> Result<PointSet, InputError> {
    if n > super::MAX_POINTS {
        return Err(input_error!("{}:{n}: at most {} points per set", generator.name(), super::MAX_POINTS));
    }
    // The coordinates are drawn as f64 first, then converted into the columns.
    let drawn = n * components.len() as u64 * 8;
    let kept: u64 = n * components.iter().map(|c| c.scalar.bytes() as u64).sum::<u64>();
    crate::memory::check(
        || format!("{}:{n}: {n} points of {} values", generator.name(), components.len()),
        drawn + kept,
    )
    .map_err(|e| input_error!("{e}"))?;
    let n = n as usize;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let d = components.len();
    let centres: Vec<f64> = (0..16 * d).map(|_| rng.random::<f64>()).collect();
    let normal = Normal::new(0.0, 0.02).expect("valid");
    let exp = Exp::new(40.0).expect("valid");
    let mut coords = vec![0f64; n * d];
    for p in 0..n {
        let cluster = rng.random_range(0..16usize);
        for c in 0..d {
            let x: f64 = match generator {
                Generator::Uniform => rng.random(),
                Generator::Clustered => centres[cluster * d + c] + normal.sample(&mut rng),
                Generator::Exponential => exp.sample(&mut rng),
            };
            coords[p * d + c] = x.clamp(0.0, 1.0 - f64::EPSILON);
        }
    }
    let columns = components
        .iter()
        .enumerate()
        .map(|(c, comp)| {
            let x = |p: usize| coords[p * d + c];
            let scaled = |p: usize| (x(p) * n as f64) as i64;
            match comp.scalar {
                Scalar::F32 => Column::F32((0..n).map(|p| (x(p) as f32).min(1.0 - f32::EPSILON / 2.0)).collect()),
                Scalar::F64 => Column::F64((0..n).map(x).collect()),
                Scalar::I32 => Column::I32((0..n).map(|p| scaled(p).min(i32::MAX as i64) as i32).collect()),
                Scalar::I64 => Column::I64((0..n).map(scaled).collect()),
                Scalar::U32 => Column::U32((0..n).map(|p| scaled(p).min(u32::MAX as i64) as u32).collect()),
            }
        })
        .collect();
    Ok(PointSet { columns, origin: format!("{}:{n} (seed {seed})", generator.name()), rows: None })
}
