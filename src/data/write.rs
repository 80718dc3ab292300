//! Result files people can open: CSV with bucket edges, .npy arrays.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use npyz::WriterBuilder;

fn create(path: &Path) -> anyhow::Result<BufWriter<std::fs::File>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    Ok(BufWriter::new(std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?))
}

/// bin_lo,bin_hi,count[,g_r] per bucket, to a file.
pub fn histogram_csv(path: &Path, edges: &[f64], counts: &[u64], g: Option<&[f64]>) -> anyhow::Result<()> {
    let mut w = create(path)?;
    histogram_csv_to(&mut w, edges, counts, g)?;
    w.flush()?;
    Ok(())
}

/// bin_lo,bin_hi,count[,g_r] per bucket, to any writer (stdout for `twobs run rdf`).
pub fn histogram_csv_to(w: &mut impl Write, edges: &[f64], counts: &[u64], g: Option<&[f64]>) -> std::io::Result<()> {
    writeln!(w, "bin_lo,bin_hi,count{}", if g.is_some() { ",g_r" } else { "" })?;
    for (k, c) in counts.iter().enumerate() {
        write!(w, "{},{},{c}", edges[k], edges[k + 1])?;
        if let Some(g) = g {
            write!(w, ",{}", g[k])?;
        }
        writeln!(w)?;
    }
    Ok(())
}

/// Index pairs as an N x 2 .npy (u32, or u64 when an index needs it) or a CSV of i,j.
pub fn pairs(path: &Path, pairs: &[[u64; 2]]) -> anyhow::Result<()> {
    let csv = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    let mut w = create(path)?;
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
    w.flush()?;
    Ok(())
}

/// Where the neighbour values go beside the ids: `knn.npy` -> `knn_values.npy`.
fn knn_values_path(ids: &Path) -> PathBuf {
    let stem = ids.file_stem().and_then(|s| s.to_str()).unwrap_or("knn");
    ids.with_file_name(format!("{stem}_values.npy"))
}

/// Neighbour ids (N x K, u32 or u64) to `ids_path`, their values (N x K, f64) beside it.
pub fn knn(ids_path: &Path, k: usize, ids: &[u64], values: &[f64]) -> anyhow::Result<PathBuf> {
    let n = (ids.len() / k.max(1)) as u64;
    let shape = [n, k as u64];
    let mut w = create(ids_path)?;
    if ids.iter().all(|&i| i <= u32::MAX as u64) {
        let mut npy = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(&mut w).begin_nd()?;
        npy.extend(ids.iter().map(|&i| i as u32))?;
        npy.finish()?;
    } else {
        let mut npy = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(&mut w).begin_nd()?;
        npy.extend(ids.iter().copied())?;
        npy.finish()?;
    }
    w.flush()?;
    let values_path = knn_values_path(ids_path);
    let mut w = create(&values_path)?;
    let mut npy = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(&mut w).begin_nd()?;
    npy.extend(values.iter().copied())?;
    npy.finish()?;
    w.flush()?;
    Ok(values_path)
}
