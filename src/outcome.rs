//! What a backend returns: the same types from the CPU and the GPU, with
//! indices into the sets as the backend saw them.

/// The result of one run.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Count(u64),
    Sum(f64),
    /// One 64-bit count per bucket.
    Histogram(Vec<u64>),
    /// (i, j) index pairs: i < j for a symmetric one-set problem; (a, b) for two sets.
    Pairs(Vec<[u32; 2]>),
    /// For each query, K neighbour indices and their values, best first; a query
    /// with fewer than K partners is padded with index u32::MAX and value +inf.
    Knn {
        k: usize,
        ids: Vec<u32>,
        values: Vec<f64>,
    },
}

impl Outcome {
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Count(_) => "count",
            Outcome::Sum(_) => "sum",
            Outcome::Histogram(_) => "histogram",
            Outcome::Pairs(_) => "pairs",
            Outcome::Knn { .. } => "knn",
        }
    }
}
