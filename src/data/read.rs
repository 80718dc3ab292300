//! Readers: .npy (plain N x D arrays or structured arrays for records), text
//! (comma or whitespace separated, the format of GDS-Join's datasets), raw
//! little-endian binary, and the synthetic generators.

use std::io::Read;
use std::path::Path;

use super::{Column, Generator, InputError, PointSet, synthesize};
use crate::input_error;
use crate::memory::{open_bounded, read_bytes};
use crate::spec::{Component, Scalar};

#[derive(Debug, Clone, Default)]
pub struct InputOptions {
    /// Values per record in a raw binary file (required for raw files, as a check).
    pub dims: Option<u32>,
    /// Drop rows with NaN or infinity instead of refusing the file.
    pub drop_nonfinite: bool,
    /// Seed of the synthetic generators.
    pub seed: u64,
}

/// Reads `arg` (a file, or `generator:N` such as `uniform:100000`) as points of `components`.
pub fn read_input(arg: &str, components: &[Component], opts: &InputOptions) -> Result<PointSet, InputError> {
    let mut frames = read_frames(arg, components, opts)?;
    if frames.len() > 1 {
        return Err(input_error!(
            "{arg}: a 3-D array of {} frames, where one set of points was expected",
            frames.len()
        ));
    }
    Ok(frames.remove(0))
}

/// Reads `arg` as the frames of a trajectory: a 3-D .npy array (frames,
/// points, values) gives one set per frame, in order; any other input is one frame.
pub fn read_frames(arg: &str, components: &[Component], opts: &InputOptions) -> Result<Vec<PointSet>, InputError> {
    let path = Path::new(arg);
    if !path.exists() {
        if let Some((name, n)) = arg.split_once(':')
            && let Some(generator) = Generator::parse(name)
        {
            let n: u64 =
                n.replace('_', "").parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                    input_error!("--input {arg}: expected {name}:N with N a positive number of points")
                })?;
            let set = synthesize(generator, n, components, opts.seed)?;
            return Ok(vec![set.validate(components, false)?]);
        }
        return Err(input_error!(
            "--input {arg}: no such file (a synthetic input is written uniform:N, clustered:N or exponential:N)"
        ));
    }
    if super::md::Format::of(path).is_some() {
        // The positions alone; `twobs run` reads boxes, types and molecules through `md`.
        let frames = super::md::read_all(path)?;
        return frames.iter().map(|f| f.points(components)?.validate(components, opts.drop_nonfinite)).collect();
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let (set, frames) = match ext.as_str() {
        "npy" => read_npy(path, components)?,
        "csv" | "txt" | "tsv" | "dat" => (read_text(path, components)?, 1),
        "bin" | "raw" => (read_raw(path, components, opts.dims)?, 1),
        _ => {
            return Err(input_error!(
                "{arg}: unknown file type `.{ext}`; expected .npy, .csv/.txt (text), .bin/.raw with --dims, or an MD file (.xyz, .gro, .lammpstrj)"
            ));
        }
    };
    if frames == 1 {
        return Ok(vec![set.validate(components, opts.drop_nonfinite)?]);
    }
    let per_frame = set.len() / frames;
    (0..frames)
        .map(|f| {
            let rows: Vec<usize> = (f * per_frame..(f + 1) * per_frame).collect();
            set.subset(&rows, format!("{}[frame {f}]", set.origin)).validate(components, opts.drop_nonfinite)
        })
        .collect()
}

/// One weight per point of a set of `n` points from `arg`: a 1-D .npy array
/// (or N x 1), a text file of one number per line, or a generator (`uniform:N`
/// draws weights in [0, 1)); read as f64, finite.
pub fn read_weights(arg: &str, n: usize) -> Result<Column, InputError> {
    let weight = [Component { name: "weight".into(), scalar: Scalar::F64 }];
    let mut set = read_input(arg, &weight, &InputOptions::default()).map_err(|e| input_error!("--weights: {e}"))?;
    if set.len() != n {
        return Err(input_error!("--weights {arg}: {} weights for a set of {n} points", set.len()));
    }
    Ok(set.columns.remove(0))
}

/// One integer id per point of a set of `n` points from `arg`: a 1-D .npy
/// array of integers or a text file of one integer per line.
pub fn read_ids(arg: &str, n: usize) -> Result<Vec<i64>, InputError> {
    let id = [Component { name: "id".into(), scalar: Scalar::I64 }];
    let set = read_input(arg, &id, &InputOptions::default())?;
    if set.len() != n {
        return Err(input_error!("{arg}: {} ids for a set of {n} points", set.len()));
    }
    let Column::I64(v) = &set.columns[0] else { unreachable!("read as i64") };
    Ok(v.clone())
}

/// How many values each point of `arg` has, read from the file's start (an
/// .npy header, a text file's first row of numbers), `--dims` for raw files
/// and synthetic inputs; None where nothing says (a synthetic input without
/// --dims). Problems whose dimension comes from their input ask this first.
pub fn values_per_point(arg: &str, opts: &InputOptions) -> Result<Option<u32>, InputError> {
    let path = Path::new(arg);
    if !path.exists() {
        return Ok(opts.dims);
    }
    if super::md::Format::of(path).is_some() {
        return Ok(Some(3));
    }
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    let cols = match ext.as_str() {
        "npy" => {
            let file = open_bounded(path, false).map_err(|e| input_error!("cannot open {}: {e}", path.display()))?;
            let npy = npyz::NpyFile::new(std::io::BufReader::new(file))
                .map_err(|e| input_error!("{}: not a readable .npy file: {e}", path.display()))?;
            match (npy.dtype(), npy.shape()) {
                (npyz::DType::Plain(_), [_]) => 1,
                (npyz::DType::Plain(_), [.., c]) => *c,
                _ => return Ok(None), // records, or a shape the reader explains
            }
        }
        "csv" | "txt" | "tsv" | "dat" => {
            let text = open_bounded(path, true).map_err(|e| input_error!("cannot open {}: {e}", path.display()))?;
            let mut row = None;
            for line in std::io::BufRead::lines(std::io::BufReader::new(text)).take(1000) {
                let line = line.map_err(|e| input_error!("cannot read {}: {e}", path.display()))?;
                let fields: Vec<&str> = if line.contains(',') {
                    line.split(',').map(str::trim).collect()
                } else {
                    line.split_whitespace().collect()
                };
                let numbers = !fields.is_empty() && fields.iter().all(|f| f.parse::<f64>().is_ok());
                if !line.trim_start().starts_with('#') && numbers {
                    row = Some(fields.len() as u64);
                    break;
                }
            }
            let Some(cols) = row else { return Ok(None) };
            cols
        }
        _ => return Ok(opts.dims),
    };
    Ok(u32::try_from(cols).ok())
}

fn origin(path: &Path) -> String {
    path.display().to_string()
}

/// Converts a value read as f64 or i64 to the spec's type; integers must be exact.
fn push_value(col: &mut Column, v: Number, at: &dyn Fn() -> String) -> Result<(), InputError> {
    let int = |v: Number| -> Result<i64, InputError> {
        match v {
            Number::Int(i) => Ok(i),
            Number::Float(f) if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 => Ok(f as i64),
            Number::Float(f) => {
                Err(input_error!("{}: {f} is not a whole number, but the spec's field is an integer", at()))
            }
        }
    };
    let range = |x: i64, lo: i64, hi: i64, t: &str| -> Result<i64, InputError> {
        if x < lo || x > hi {
            return Err(input_error!("{}: {x} does not fit {t}", at()));
        }
        Ok(x)
    };
    match col {
        Column::F32(c) => c.push(match v {
            Number::Float(f) => f as f32,
            Number::Int(i) => i as f32,
        }),
        Column::F64(c) => c.push(match v {
            Number::Float(f) => f,
            Number::Int(i) => i as f64,
        }),
        Column::I32(c) => c.push(range(int(v)?, i32::MIN as i64, i32::MAX as i64, "i32")? as i32),
        Column::I64(c) => c.push(int(v)?),
        Column::U32(c) => c.push(range(int(v)?, 0, u32::MAX as i64, "u32")? as u32),
    }
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Number {
    Int(i64),
    Float(f64),
}

fn columns_for(components: &[Component], n: usize) -> Vec<Column> {
    components.iter().map(|c| Column::with_capacity(c.scalar, n)).collect()
}

/// Why the first row of a text file is read as data though a field is not a number.
const HEADER: &str = " (a header line is skipped only when none of its fields is a number)";

/// Text: one point per line, values separated by commas or white space; `#`
/// comments and one header line of names (no field a number) are skipped.
fn read_text(path: &Path, components: &[Component]) -> Result<PointSet, InputError> {
    // Read within bounds: a file larger than memory, or a stream without lines
    // (/dev/zero), is refused before it is taken whole.
    let file = open_bounded(path, true).map_err(|e| input_error!("cannot open {}: {e}", path.display()))?;
    let mut reader = csv::ReaderBuilder::new().has_headers(false).flexible(true).comment(Some(b'#')).from_reader(file);
    let d = components.len();
    let mut columns = columns_for(components, 0);
    let mut header_skipped = false;
    for (k, record) in reader.records().enumerate() {
        let record = record.map_err(|e| input_error!("{}: cannot read line {}: {e}", path.display(), k + 1))?;
        let line = record.position().map_or(k as u64 + 1, |p| p.line());
        // GDS-Join's files separate by commas; many others by spaces or tabs.
        let fields: Vec<&str> = if record.len() == 1 {
            record[0].split_whitespace().collect()
        } else {
            record.iter().map(str::trim).collect()
        };
        if fields.is_empty() || (fields.len() == 1 && fields[0].is_empty()) {
            continue;
        }
        // A header holds names only: a first row with any number in it is
        // data, so that a typo in it is an error, not a row dropped unseen.
        let first_row = !header_skipped && columns[0].is_empty();
        if first_row && fields.iter().all(|f| f.parse::<f64>().is_err()) {
            header_skipped = true;
            continue;
        }
        if fields.len() != d {
            return Err(input_error!(
                "{}:{line}: {} values on this line, expected {d} ({})",
                path.display(),
                fields.len(),
                names(components)
            ));
        }
        for ((col, text), comp) in columns.iter_mut().zip(&fields).zip(components) {
            let at = || format!("{}:{line}: field `{}`", path.display(), comp.name);
            let v = if comp.scalar.is_integer() {
                text.parse::<i64>().map(Number::Int).or_else(|_| text.parse::<f64>().map(Number::Float))
            } else {
                text.parse::<f64>().map(Number::Float)
            }
            .map_err(|_| input_error!("{}: `{text}` is not a number{}", at(), if first_row { HEADER } else { "" }))?;
            if comp.scalar == Scalar::F32 {
                // Parse straight to f32: rounding once, to the nearest f32.
                let Column::F32(c) = col else { unreachable!() };
                c.push(text.parse::<f32>().map_err(|_| input_error!("{}: `{text}` is not a number", at()))?);
                continue;
            }
            push_value(col, v, &at)?;
        }
    }
    Ok(PointSet { columns, origin: origin(path), rows: None })
}

fn names(components: &[Component]) -> String {
    components.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// Raw little-endian records: the components of each point in order, of the spec's types.
fn read_raw(path: &Path, components: &[Component], dims: Option<u32>) -> Result<PointSet, InputError> {
    let Some(dims) = dims else {
        return Err(input_error!(
            "{}: a raw binary file needs --dims (values per point; the spec has {})",
            path.display(),
            components.len()
        ));
    };
    if dims as usize != components.len() {
        return Err(input_error!(
            "{}: --dims {dims}, but the spec's element has {} values ({})",
            path.display(),
            components.len(),
            names(components)
        ));
    }
    let bytes = read_bytes(path).map_err(|e| input_error!("cannot read {}: {e}", path.display()))?;
    let record: usize = components.iter().map(|c| c.scalar.bytes() as usize).sum();
    if bytes.is_empty() {
        return Err(input_error!("{}: the file is empty", path.display()));
    }
    if bytes.len() % record != 0 {
        return Err(input_error!(
            "{}: {} bytes is not a whole number of {record}-byte points ({})",
            path.display(),
            bytes.len(),
            components.iter().map(|c| format!("{}: {}", c.name, c.scalar)).collect::<Vec<_>>().join(", ")
        ));
    }
    let n = bytes.len() / record;
    let mut columns = columns_for(components, n);
    for r in 0..n {
        let mut at = r * record;
        for (col, comp) in columns.iter_mut().zip(components) {
            let b = &bytes[at..at + comp.scalar.bytes() as usize];
            match col {
                Column::F32(c) => c.push(f32::from_le_bytes(b.try_into().unwrap())),
                Column::F64(c) => c.push(f64::from_le_bytes(b.try_into().unwrap())),
                Column::I32(c) => c.push(i32::from_le_bytes(b.try_into().unwrap())),
                Column::I64(c) => c.push(i64::from_le_bytes(b.try_into().unwrap())),
                Column::U32(c) => c.push(u32::from_le_bytes(b.try_into().unwrap())),
            }
            at += b.len();
        }
    }
    Ok(PointSet { columns, origin: origin(path), rows: None })
}

/// A little-endian numpy scalar type this reader understands.
fn npy_scalar(type_str: &str) -> Option<(Scalar, usize, bool)> {
    // (type, bytes, is the file's own float type)
    Some(match type_str {
        "<f4" => (Scalar::F32, 4, true),
        "<f8" => (Scalar::F64, 8, true),
        "<i4" => (Scalar::I32, 4, false),
        "<i8" => (Scalar::I64, 8, false),
        "<u4" => (Scalar::U32, 4, false),
        _ => return None,
    })
}

fn decode(scalar: Scalar, b: &[u8]) -> Number {
    match scalar {
        Scalar::F32 => Number::Float(f32::from_le_bytes(b.try_into().unwrap()) as f64),
        Scalar::F64 => Number::Float(f64::from_le_bytes(b.try_into().unwrap())),
        Scalar::I32 => Number::Int(i32::from_le_bytes(b.try_into().unwrap()) as i64),
        Scalar::I64 => Number::Int(i64::from_le_bytes(b.try_into().unwrap())),
        Scalar::U32 => Number::Int(u32::from_le_bytes(b.try_into().unwrap()) as i64),
    }
}

/// .npy: an N x D (or N, for one value per point) array of f4, f8, i4, i8 or u4,
/// in C or Fortran order; or a structured array whose fields are the spec's fields.
/// A .npy file's points, and how many frames they are (a 3-D array (F, N, D)
/// is read as F x N rows, frame after frame).
fn read_npy(path: &Path, components: &[Component]) -> Result<(PointSet, usize), InputError> {
    let file = std::io::BufReader::new(
        open_bounded(path, false).map_err(|e| input_error!("cannot open {}: {e}", path.display()))?,
    );
    let npy =
        npyz::NpyFile::new(file).map_err(|e| input_error!("{}: not a readable .npy file: {e}", path.display()))?;
    let shape = npy.shape().to_vec();
    let fortran = npy.order() == npyz::Order::Fortran;
    let dtype = npy.dtype();
    let d = components.len();
    // (column type, byte offset within a record) for each component; record size.
    let mut frames = 1;
    let (layout, record, n): (Vec<(Scalar, usize)>, usize, usize) = match &dtype {
        npyz::DType::Plain(ts) => {
            let ts = ts.to_string();
            let (scalar, bytes, _) = npy_scalar(&ts).ok_or_else(|| {
                input_error!(
                    "{}: element type `{ts}` is not supported; expected <f4, <f8, <i4, <i8 or <u4",
                    path.display()
                )
            })?;
            let (n, cols) = match shape.as_slice() {
                [n] => (*n as usize, 1),
                [n, c] => (*n as usize, *c as usize),
                [_, _, _] if fortran => {
                    return Err(input_error!(
                        "{}: a 3-D array in Fortran order; save the trajectory in C order (numpy's default)",
                        path.display()
                    ));
                }
                [f, n, c] => {
                    frames = (*f as usize).max(1);
                    (f.saturating_mul(*n) as usize, *c as usize)
                }
                other => {
                    return Err(input_error!(
                        "{}: shape {other:?}; expected (N, {d}), or (frames, N, {d}) for a trajectory",
                        path.display()
                    ));
                }
            };
            if cols != d {
                return Err(input_error!(
                    "{}: shape ({n}, {cols}), but the spec's element has {d} values ({})",
                    path.display(),
                    names(components)
                ));
            }
            ((0..d).map(|c| (scalar, c * bytes)).collect(), d * bytes, n)
        }
        npyz::DType::Record(fields) => {
            let n = match shape.as_slice() {
                [n] => *n as usize,
                other => {
                    return Err(input_error!(
                        "{}: a structured array of shape {other:?}; expected one dimension",
                        path.display()
                    ));
                }
            };
            let mut offsets = Vec::new();
            let mut at = 0;
            for f in fields {
                let npyz::DType::Plain(ts) = &f.dtype else {
                    return Err(input_error!("{}: field `{}` is not a plain number", path.display(), f.name));
                };
                let ts = ts.to_string();
                let (scalar, bytes, _) = npy_scalar(&ts).ok_or_else(|| {
                    input_error!(
                        "{}: field `{}` has type `{ts}`; expected <f4, <f8, <i4, <i8 or <u4",
                        path.display(),
                        f.name
                    )
                })?;
                offsets.push((f.name.clone(), scalar, at));
                at += bytes;
            }
            let mut layout = Vec::new();
            for c in components {
                let (_, scalar, off) = offsets.iter().find(|(name, _, _)| *name == c.name).ok_or_else(|| {
                    input_error!(
                        "{}: no field `{}`; the file has {}",
                        path.display(),
                        c.name,
                        offsets.iter().map(|(n, s, _)| format!("{n}: {s}")).collect::<Vec<_>>().join(", ")
                    )
                })?;
                layout.push((*scalar, *off));
            }
            (layout, at, n)
        }
        npyz::DType::Array(..) => {
            return Err(input_error!("{}: array-valued elements are not supported", path.display()));
        }
    };
    if n == 0 {
        return Err(input_error!("{}: the array is empty", path.display()));
    }
    // The header's shape is checked against the file before anything is allocated for it.
    let file_bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    let wanted = n.checked_mul(record).filter(|&b| b as u64 <= file_bytes).ok_or_else(|| {
        input_error!(
            "{}: the file is truncated: its header promises {n} points of {record} bytes, the file has {file_bytes} bytes",
            path.display()
        )
    })?;
    let mut bytes = Vec::with_capacity(wanted);
    npy.into_inner().read_to_end(&mut bytes).map_err(|e| input_error!("cannot read {}: {e}", path.display()))?;
    if bytes.len() < n * record {
        return Err(input_error!(
            "{}: the file is truncated: {} bytes of data for {n} points of {record} bytes",
            path.display(),
            bytes.len()
        ));
    }
    let mut columns = columns_for(components, n);
    for (c, (col, &(scalar, off))) in columns.iter_mut().zip(&layout).enumerate() {
        let width = scalar.bytes() as usize;
        for r in 0..n {
            // Fortran order stores each column contiguously.
            let at =
                if fortran && matches!(dtype, npyz::DType::Plain(_)) { (c * n + r) * width } else { r * record + off };
            let v = decode(scalar, &bytes[at..at + width]);
            let at_text = || format!("{}: row {r}, field `{}`", path.display(), components[c].name);
            if components[c].scalar == Scalar::F32 && scalar == Scalar::F32 {
                let Column::F32(v32) = col else { unreachable!() };
                v32.push(f32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()));
                continue;
            }
            push_value(col, v, &at_text)?;
        }
    }
    Ok((PointSet { columns, origin: origin(path), rows: None }, frames))
}
