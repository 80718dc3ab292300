//! Result files people can open: CSV with bucket edges, .npy arrays.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::outcome::Totals;

use npyz::WriterBuilder;

/// A result file that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}: {source}", path.display())]
pub struct WriteError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Names the file an I/O error was about.
trait At<T> {
    fn at(self, path: &Path) -> Result<T, WriteError>;
}

impl<T> At<T> for std::io::Result<T> {
    fn at(self, path: &Path) -> Result<T, WriteError> {
        self.map_err(|source| WriteError { path: path.to_owned(), source })
    }
}

fn create(path: &Path) -> Result<BufWriter<std::fs::File>, WriteError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).at(dir)?;
    }
    Ok(BufWriter::new(std::fs::File::create(path).at(path)?))
}

/// bin_lo,bin_hi,count[,g_r] per bucket, to a file.
pub fn histogram_csv(path: &Path, edges: &[f64], totals: &Totals, g: Option<&[f64]>) -> Result<(), WriteError> {
    let mut w = create(path)?;
    histogram_csv_to(&mut w, edges, totals, g).at(path)?;
    w.flush().at(path)
}

/// bin_lo,bin_hi,count[,g_r] per bucket (`sum` for summed totals), to any
/// writer (stdout for `twobs run rdf`).
pub fn histogram_csv_to(w: &mut impl Write, edges: &[f64], totals: &Totals, g: Option<&[f64]>) -> std::io::Result<()> {
    let column = match totals {
        Totals::Counts(_) => "count",
        Totals::Sums(_) => "sum",
    };
    writeln!(w, "bin_lo,bin_hi,{column}{}", if g.is_some() { ",g_r" } else { "" })?;
    for k in 0..totals.len() {
        match totals {
            Totals::Counts(c) => write!(w, "{},{},{}", edges[k], edges[k + 1], c[k])?,
            Totals::Sums(s) => write!(w, "{},{},{}", edges[k], edges[k + 1], s[k])?,
        }
        if let Some(g) = g {
            write!(w, ",{}", g[k])?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// Index pairs as an N x 2 .npy (u32, or u64 when an index needs it) or a CSV of i,j.
pub fn pairs(path: &Path, pairs: &[[u64; 2]]) -> Result<(), WriteError> {
    let csv = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    let mut w = create(path)?;
    pairs_to(&mut w, csv, pairs).at(path)?;
    w.flush().at(path)
}

fn pairs_to(mut w: &mut impl Write, csv: bool, pairs: &[[u64; 2]]) -> std::io::Result<()> {
    if csv {
        writeln!(w, "i,j")?;
        for [i, j] in pairs {
            writeln!(w, "{i},{j}")?;
        }
    } else {
        let shape = [pairs.len() as u64, 2];
        if pairs.iter().all(|p| p[0] <= u32::MAX as u64 && p[1] <= u32::MAX as u64) {
            let mut npy = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(&mut w).begin_nd()?;
            npy.extend(pairs.iter().flat_map(|p| [p[0] as u32, p[1] as u32]))?;
            npy.finish()?;
        } else {
            let mut npy = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(&mut w).begin_nd()?;
            npy.extend(pairs.iter().flat_map(|p| [p[0], p[1]]))?;
            npy.finish()?;
        }
    }
    Ok(())
}

/// Where the neighbour values go beside the ids: `knn.npy` -> `knn_values.npy`.
fn knn_values_path(ids: &Path) -> PathBuf {
    let stem = ids.file_stem().and_then(|s| s.to_str()).unwrap_or("knn");
    ids.with_file_name(format!("{stem}_values.npy"))
}

/// Neighbour ids (N x K, int64; -1 for no neighbour) to `ids_path`, their
/// values (N x K, f64) beside it.
pub fn knn(ids_path: &Path, k: usize, ids: &[i64], values: &[f64]) -> Result<PathBuf, WriteError> {
    let n = (ids.len() / k.max(1)) as u64;
    let shape = [n, k as u64];
    let mut w = create(ids_path)?;
    knn_ids_to(&mut w, &shape, ids).at(ids_path)?;
    w.flush().at(ids_path)?;
    let values_path = knn_values_path(ids_path);
    let mut w = create(&values_path)?;
    let write_values = |w: &mut BufWriter<std::fs::File>| -> std::io::Result<()> {
        let mut npy = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(&mut *w).begin_nd()?;
        npy.extend(values.iter().copied())?;
        npy.finish()?;
        w.flush()
    };
    write_values(&mut w).at(&values_path)?;
    Ok(values_path)
}

fn knn_ids_to(mut w: &mut impl Write, shape: &[u64], ids: &[i64]) -> std::io::Result<()> {
    let mut npy = npyz::WriteOptions::new().default_dtype().shape(shape).writer(&mut w).begin_nd()?;
    npy.extend(ids.iter().copied())?;
    npy.finish()
}
