//! Molecular-dynamics files: XYZ (and extended XYZ), GROMACS .gro and .xtc
//! (through the `molly` crate), and LAMMPS text dumps, each a trajectory of
//! one or more frames read one at a time.
//! A frame is its atoms' positions (in the box's frame, the box's corner at
//! the origin), the periodic box where the file gives one, each atom's type
//! name and, where the file has one, its molecule id.
//!
//! Units are the file's: nm for .gro, whatever the XYZ or LAMMPS run used
//! (usually Angstrom); `r_max` is in the same unit.

use std::fs::File;
use std::io::{BufRead, BufReader, Lines};
use std::path::Path;

use super::{Column, InputError, PointSet};
use crate::input_error;
use crate::spec::{Component, Scalar};

/// A periodic box as the spec's box parameter takes it: edge vectors
/// (lx, 0, 0), (xy ly, ly, 0), (xz lz, yz lz, lz) (tilt factors as in HOOMD and freud).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub lengths: [f64; 3],
    pub tilts: [f64; 3],
}

impl Cell {
    /// The text of the box parameter: `Lx,Ly,Lz` or `Lx,Ly,Lz,xy,xz,yz`.
    pub fn param_text(&self) -> String {
        let mut v: Vec<f64> = self.lengths.to_vec();
        if self.tilts != [0.0; 3] {
            v.extend(self.tilts);
        }
        v.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>().join(",")
    }

    /// The box of edge lengths a, b, c and angles alpha (between b and c),
    /// beta (a, c) and gamma (a, b) in degrees, as MDAnalysis's
    /// `ts.dimensions` gives it, laid as its `triclinic_vectors` lays the
    /// vectors (a along x, b in the xy plane), which is twobs's; right angles
    /// are exact (no tilt from cos 90 degrees' rounding).
    pub fn from_dimensions([a, b, c, alpha, beta, gamma]: [f64; 6]) -> Result<Cell, InputError> {
        let good = |x: f64| x.is_finite() && x > 0.0;
        if !(good(a) && good(b) && good(c) && [alpha, beta, gamma].iter().all(|&t| t > 0.0 && t < 180.0)) {
            return Err(crate::input_error!(
                "box dimensions {a}, {b}, {c}, {alpha}, {beta}, {gamma}: expected positive lengths and angles in (0, 180) degrees"
            ));
        }
        let cos = |t: f64| if t == 90.0 { 0.0 } else { t.to_radians().cos() };
        let sin_gamma = if gamma == 90.0 { 1.0 } else { gamma.to_radians().sin() };
        let bv = [b * cos(gamma), b * sin_gamma, 0.0];
        let cx = c * cos(beta);
        let cy = c * (cos(alpha) - cos(beta) * cos(gamma)) / sin_gamma;
        let cz2 = c * c - cx * cx - cy * cy;
        if cz2 <= 0.0 {
            return Err(crate::input_error!(
                "box dimensions {a}, {b}, {c}, {alpha}, {beta}, {gamma}: its angles make no box (the third vector is flat)"
            ));
        }
        Ok(Cell::from_lower([a, 0.0, 0.0], bv, [cx, cy, cz2.sqrt()]))
    }

    /// The box of three edge vectors a, b, c that already lie as twobs's do
    /// (a along x, b in the xy plane, c above it).
    fn from_lower(a: [f64; 3], b: [f64; 3], c: [f64; 3]) -> Cell {
        let (lx, ly, lz) = (a[0], b[1], c[2]);
        Cell { lengths: [lx, ly, lz], tilts: [b[0] / ly, c[0] / lz, c[1] / lz] }
    }
}

/// One frame of a trajectory.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// x, y and z of each atom, in the box's frame (see [`Cell`]).
    pub positions: [Vec<f64>; 3],
    /// The periodic box, where the file gives one.
    pub cell: Option<Cell>,
    /// Each atom's type name: an XYZ species, a .gro atom name, a LAMMPS
    /// `element` or else `type`; empty where the file names none (.xtc: a
    /// topology gives them, [`Frame::with_topology`]).
    pub types: Vec<String>,
    /// Each atom's molecule: a LAMMPS `mol` column, an extended XYZ `mol`
    /// property, a .gro residue (a run of atoms with the same residue
    /// number and name); None where the file has none.
    pub molecules: Option<Vec<i64>>,
    /// Where it came from: `file[frame k]`, or the file for a file of one frame.
    pub origin: String,
}

impl Frame {
    pub fn len(&self) -> usize {
        self.positions[0].len()
    }

    pub fn is_empty(&self) -> bool {
        self.positions[0].is_empty()
    }

    /// This frame with the types and molecules of `topology` (a frame of the
    /// same atoms, in the same order), where it has none of its own.
    pub fn with_topology(mut self, topology: &Frame) -> Result<Frame, InputError> {
        if topology.len() != self.len() {
            return Err(input_error!(
                "{}: {} atoms, but the topology {} has {}",
                self.origin,
                self.len(),
                topology.origin,
                topology.len()
            ));
        }
        if self.types.is_empty() {
            self.types = topology.types.clone();
        }
        if self.molecules.is_none() {
            self.molecules = topology.molecules.clone();
        }
        Ok(self)
    }
}

/// The formats, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Xyz,
    Gro,
    Xtc,
    LammpsDump,
}

impl Format {
    /// The MD format a path's extension names, if any.
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        Some(match ext.as_str() {
            "xyz" | "extxyz" => Format::Xyz,
            "gro" => Format::Gro,
            "xtc" => Format::Xtc,
            "lammpstrj" | "dump" | "lammpsdump" => Format::LammpsDump,
            _ => return None,
        })
    }
}

/// Every frame of the MD file at `path`, read one at a time.
pub fn frames(path: &Path) -> Result<Frames, InputError> {
    let format = Format::of(path)
        .ok_or_else(|| input_error!("{}: not an MD file (.xyz, .gro, .xtc, .lammpstrj)", path.display()))?;
    let file = File::open(path).map_err(|e| input_error!("cannot open {}: {e}", path.display()))?;
    if format == Format::Xtc {
        let len = file.metadata().map_err(|e| input_error!("cannot read {}: {e}", path.display()))?.len();
        let reader = molly::XTCReader::new(Counted { file, at: 0, len });
        return Ok(Frames { format, lines: Text::none(path), xtc: Some(reader), read: 0 });
    }
    // A text file is read within bounds: no line longer than any MD file has.
    drop(file);
    let bounded =
        crate::memory::open_bounded(path, true).map_err(|e| input_error!("cannot open {}: {e}", path.display()))?;
    Ok(Frames {
        format,
        lines: Text { lines: Some(BufReader::new(bounded).lines()), line: 0, path: path.display().to_string() },
        xtc: None,
        read: 0,
    })
}

/// Reads every frame of `path` (all of them in memory).
pub fn read_all(path: &Path) -> Result<Vec<Frame>, InputError> {
    let mut all: Vec<Frame> = frames(path)?.collect::<Result<_, _>>()?;
    if all.is_empty() {
        return Err(input_error!("{}: no frames", path.display()));
    }
    if all.len() == 1 {
        all[0].origin = path.display().to_string();
    }
    Ok(all)
}

/// The frames of an MD file, in order.
pub struct Frames {
    format: Format,
    lines: Text,
    xtc: Option<molly::XTCReader<Counted>>,
    read: usize,
}

impl Iterator for Frames {
    type Item = Result<Frame, InputError>;

    fn next(&mut self) -> Option<Self::Item> {
        let frame = match self.format {
            Format::Xyz => xyz(&mut self.lines, self.read),
            Format::Gro => gro(&mut self.lines, self.read),
            Format::Xtc => xtc(self.xtc.as_mut().expect("an xtc reader"), &self.lines, self.read),
            Format::LammpsDump => lammps(&mut self.lines, self.read),
        };
        self.read += 1;
        frame.transpose()
    }
}

/// A text file's lines, numbered from 1, for messages.
struct Text {
    lines: Option<Lines<BufReader<crate::memory::Bounded<File>>>>,
    line: usize,
    path: String,
}

impl Text {
    /// A binary file's name, for messages.
    fn none(path: &Path) -> Text {
        Text { lines: None, line: 0, path: path.display().to_string() }
    }

    /// The next line, or None at the end.
    fn next(&mut self) -> Result<Option<String>, InputError> {
        match self.lines.as_mut().and_then(Iterator::next) {
            None => Ok(None),
            Some(Err(e)) => Err(input_error!("{}:{}: cannot read: {e}", self.path, self.line + 1)),
            Some(Ok(l)) => {
                self.line += 1;
                Ok(Some(l))
            }
        }
    }

    /// The next line that is not blank, or None at the end.
    fn next_nonblank(&mut self) -> Result<Option<String>, InputError> {
        while let Some(l) = self.next()? {
            if !l.trim().is_empty() {
                return Ok(Some(l));
            }
        }
        Ok(None)
    }

    /// The next line, which must be there: `what` says what was expected.
    fn expect(&mut self, what: &str) -> Result<String, InputError> {
        self.next()?
            .ok_or_else(|| input_error!("{}:{}: the file ends where {what} was expected", self.path, self.line + 1))
    }

    fn error(&self, what: std::fmt::Arguments) -> InputError {
        input_error!("{}:{}: {what}", self.path, self.line)
    }

    fn number(&self, text: &str, what: &str) -> Result<f64, InputError> {
        match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.error(format_args!("{what}: `{}` is not a finite number", text.trim()))),
        }
    }

    fn count(&self, text: &str, what: &str) -> Result<usize, InputError> {
        text.trim()
            .parse::<usize>()
            .map_err(|_| self.error(format_args!("{what}: `{}` is not a whole number", text.trim())))
    }

    fn integer(&self, text: &str, what: &str) -> Result<i64, InputError> {
        text.trim().parse::<i64>().map_err(|_| self.error(format_args!("{what}: `{}` is not an integer", text.trim())))
    }

    fn origin(&self, frame: usize) -> String {
        format!("{}[frame {frame}]", self.path)
    }
}

/// Positions given in some frame of reference, moved into the box's: the
/// box's corner to the origin, and, where the edge vectors are not yet as
/// twobs's lie (a along x, b in the xy plane), rotated so (distances keep).
struct Placement {
    origin: [f64; 3],
    /// Rows of the rotation (None: none needed).
    rotation: Option<[[f64; 3]; 3]>,
}

impl Placement {
    const NONE: Placement = Placement { origin: [0.0; 3], rotation: None };

    fn place(&self, r: [f64; 3]) -> [f64; 3] {
        let d = [r[0] - self.origin[0], r[1] - self.origin[1], r[2] - self.origin[2]];
        match &self.rotation {
            None => d,
            Some(m) => m.map(|row| row[0] * d[0] + row[1] * d[1] + row[2] * d[2]),
        }
    }
}

fn dot(a: [f64; 3], b: [f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

/// The box of edge vectors a, b, c in any orientation (an extended XYZ
/// lattice), and the rotation that lays them as twobs's; refused where they
/// are left-handed or flat.
fn general_cell(a: [f64; 3], b: [f64; 3], c: [f64; 3], text: &Text) -> Result<(Cell, Placement), InputError> {
    if a[1] == 0.0 && a[2] == 0.0 && b[2] == 0.0 && a[0] > 0.0 && b[1] > 0.0 && c[2] > 0.0 {
        return Ok((Cell::from_lower(a, b, c), Placement::NONE));
    }
    let norm = |v: [f64; 3]| dot(v, v).sqrt();
    let la = norm(a);
    let e1 = a.map(|x| x / la);
    let b_perp = [0, 1, 2].map(|k| b[k] - dot(b, e1) * e1[k]);
    let lb = norm(b_perp);
    if la == 0.0 || lb == 0.0 {
        return Err(text.error(format_args!("the lattice's first two vectors are zero or parallel")));
    }
    let e2 = b_perp.map(|x| x / lb);
    let e3 = [e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]];
    let rotation = [e1, e2, e3];
    let r = |v: [f64; 3]| rotation.map(|row| dot(row, v));
    let (a2, b2, c2) = (r(a), r(b), r(c));
    if c2[2] <= 0.0 {
        return Err(text.error(format_args!(
            "the lattice vectors are left-handed or flat (the third lies at or below the plane of the first two)"
        )));
    }
    let (a2, b2) = ([a2[0], 0.0, 0.0], [b2[0], b2[1], 0.0]);
    Ok((Cell::from_lower(a2, b2, c2), Placement { origin: [0.0; 3], rotation: Some(rotation) }))
}

// ------------------------------------------------------------------ XYZ

/// The `key=value` pairs of an extended XYZ comment line (values may be quoted).
fn ext_xyz_pairs(comment: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut rest = comment.trim();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else { break };
        let key = rest[..eq].trim();
        // A key is the last word before `=`.
        let key = key.rsplit(char::is_whitespace).next().unwrap_or("").to_ascii_lowercase();
        let after = rest[eq + 1..].trim_start();
        let (value, next) = if let Some(q) = after.strip_prefix('"') {
            match q.find('"') {
                Some(end) => (&q[..end], &q[end + 1..]),
                None => (q, ""),
            }
        } else {
            let end = after.find(char::is_whitespace).unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        pairs.push((key, value.to_owned()));
        rest = next.trim_start();
    }
    pairs
}

/// Where the species, positions and molecule ids lie among an atom line's
/// fields, from `Properties=name:type:count:...` (default species:S:1:pos:R:3).
struct Columns {
    species: Option<usize>,
    pos: usize,
    molecule: Option<usize>,
    fields: usize,
}

fn xyz_columns(properties: Option<&str>, text: &Text) -> Result<Columns, InputError> {
    let Some(p) = properties else { return Ok(Columns { species: Some(0), pos: 1, molecule: None, fields: 4 }) };
    let parts: Vec<&str> = p.split(':').collect();
    if !parts.len().is_multiple_of(3) {
        return Err(text.error(format_args!("Properties=`{p}`: expected name:type:count triples")));
    }
    let (mut species, mut pos, mut molecule, mut at) = (None, None, None, 0);
    for t in parts.chunks(3) {
        let n: usize = t[2]
            .parse()
            .map_err(|_| text.error(format_args!("Properties=`{p}`: count `{}` is not a whole number", t[2])))?;
        match (t[0].to_ascii_lowercase().as_str(), t[1].to_ascii_uppercase().as_str(), n) {
            ("species", "S", 1) => species = Some(at),
            ("pos", "R", 3) => pos = Some(at),
            ("mol" | "molecule" | "molid" | "mol_id", "I", 1) => molecule = Some(at),
            ("pos", ..) => return Err(text.error(format_args!("Properties=`{p}`: pos must be R:3"))),
            _ => {}
        }
        at += n;
    }
    let pos = pos.ok_or_else(|| text.error(format_args!("Properties=`{p}`: no pos:R:3 column")))?;
    Ok(Columns { species, pos, molecule, fields: at })
}

fn xyz(text: &mut Text, index: usize) -> Result<Option<Frame>, InputError> {
    let Some(first) = text.next_nonblank()? else { return Ok(None) };
    let n = text.count(first.split_whitespace().next().unwrap_or(""), "the number of atoms on a frame's first line")?;
    let comment = text.expect("the comment line")?;
    let pairs = ext_xyz_pairs(&comment);
    let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let columns = xyz_columns(get("properties"), text)?;
    let (cell, placement) = match get("lattice") {
        None => (None, Placement::NONE),
        Some(l) => {
            let v: Vec<f64> = l.split_whitespace().map(|t| text.number(t, "Lattice")).collect::<Result<_, _>>()?;
            let [ax, ay, az, bx, by, bz, cx, cy, cz] = v[..] else {
                return Err(text.error(format_args!(
                    "Lattice=\"{l}\": expected 9 numbers (three edge vectors), found {}",
                    v.len()
                )));
            };
            if let Some(pbc) = get("pbc")
                && pbc.split_whitespace().any(|t| !matches!(t, "T" | "t" | "True" | "true" | "1"))
            {
                return Err(text.error(format_args!(
                    "pbc=\"{pbc}\": twobs's box is periodic along every axis; a box open along some is not supported"
                )));
            }
            let (c, p) = general_cell([ax, ay, az], [bx, by, bz], [cx, cy, cz], text)?;
            (Some(c), p)
        }
    };
    let mut frame = empty(n, columns.molecule.is_some(), text.origin(index), cell);
    for _ in 0..n {
        let line = text.expect(&format!("{n} atom lines"))?;
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < columns.fields {
            return Err(text.error(format_args!("{} fields on this atom line, expected {}", f.len(), columns.fields)));
        }
        let r = [0, 1, 2].map(|k| text.number(f[columns.pos + k], ["x", "y", "z"][k]));
        let [x, y, z] = r;
        push(&mut frame, placement.place([x?, y?, z?]));
        frame.types.push(columns.species.map_or_else(String::new, |s| f[s].to_owned()));
        if let (Some(m), Some(ms)) = (columns.molecule, frame.molecules.as_mut()) {
            ms.push(text.integer(f[m], "molecule id")?);
        }
    }
    Ok(Some(frame))
}

fn empty(n: usize, molecules: bool, origin: String, cell: Option<Cell>) -> Frame {
    Frame {
        positions: [Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n)],
        cell,
        types: Vec::with_capacity(n),
        molecules: molecules.then(|| Vec::with_capacity(n)),
        origin,
    }
}

fn push(frame: &mut Frame, r: [f64; 3]) {
    for (c, x) in frame.positions.iter_mut().zip(r) {
        c.push(x);
    }
}

// ------------------------------------------------------------------ GRO

/// A .gro frame: a title, the number of atoms, one fixed-column line per
/// atom (residue number 5, residue name 5, atom name 5, atom number 5, then
/// x, y, z in nm, 8 wide with 3 decimals, or as wide as the distance between
/// the first two decimal points), and the box (v1x v2y v3z [v1y v1z v2x v2z v3x v3y]).
fn gro(text: &mut Text, index: usize) -> Result<Option<Frame>, InputError> {
    let Some(_title) = text.next_nonblank()? else { return Ok(None) };
    let count = text.expect("the number of atoms")?;
    let n = text.count(&count, "the number of atoms (the second line of a .gro frame)")?;
    let mut frame = empty(n, true, text.origin(index), None);
    let mut last_residue: Option<(String, String)> = None;
    let mut molecule = -1i64;
    for _ in 0..n {
        let line = text.expect(&format!("{n} atom lines"))?;
        let field = |from: usize, to: usize| line.get(from..to.min(line.len())).unwrap_or("");
        // Variable precision: the coordinates are as wide as the distance between decimal points.
        let width = match (field(20, line.len()).find('.'), field(20, line.len()).match_indices('.').nth(1)) {
            (Some(a), Some((b, _))) => b - a,
            _ => 8,
        };
        if line.len() < 20 + 3 * width {
            return Err(text.error(format_args!(
                "an atom line of {} characters; a .gro atom line has 20 of names and numbers, then x, y and z in {width} columns each",
                line.len()
            )));
        }
        let mut r = [0.0; 3];
        for (k, x) in r.iter_mut().enumerate() {
            *x = text.number(field(20 + k * width, 20 + (k + 1) * width), ["x", "y", "z"][k])?;
        }
        push(&mut frame, r);
        let residue = (field(0, 5).trim().to_owned(), field(5, 10).trim().to_owned());
        if residue.0.parse::<i64>().is_err() {
            return Err(text.error(format_args!("residue number `{}` (columns 1-5) is not an integer", residue.0)));
        }
        // Residue numbers wrap at 99999: a molecule is a run of atoms of one residue.
        if last_residue.as_ref() != Some(&residue) {
            molecule += 1;
            last_residue = Some(residue);
        }
        frame.molecules.as_mut().expect("gro has residues").push(molecule);
        frame.types.push(field(10, 15).trim().to_owned());
    }
    let line = text.expect("the box line")?;
    let v: Vec<f64> = line.split_whitespace().map(|t| text.number(t, "box")).collect::<Result<_, _>>()?;
    let cell = match v[..] {
        [x, y, z] => Cell::from_lower([x, 0.0, 0.0], [0.0, y, 0.0], [0.0, 0.0, z]),
        [v1x, v2y, v3z, v1y, v1z, v2x, v2z, v3x, v3y] => {
            if v1y != 0.0 || v1z != 0.0 || v2z != 0.0 {
                return Err(text.error(format_args!("box: GROMACS boxes have v1(y) = v1(z) = v2(z) = 0")));
            }
            Cell::from_lower([v1x, 0.0, 0.0], [v2x, v2y, 0.0], [v3x, v3y, v3z])
        }
        _ => return Err(text.error(format_args!("box: {} numbers; expected 3 or 9", v.len()))),
    };
    // A box of zeros is none (GROMACS writes one for a vacuum system).
    frame.cell = (cell.lengths.iter().all(|l| *l > 0.0)).then_some(cell);
    if frame.cell.is_none() && cell.lengths.iter().any(|l| *l != 0.0) {
        return Err(
            text.error(format_args!("box: lengths must be positive (or all 0 for none); found `{}`", line.trim()))
        );
    }
    Ok(Some(frame))
}

// ------------------------------------------------------------------ XTC

/// A GROMACS .xtc frame, decoded by `molly` (pure Rust, maintained; the
/// other crates wrap the C xdrfile library): positions and box in nm, no
/// names (a topology gives them).
fn xtc(reader: &mut molly::XTCReader<Counted>, text: &Text, index: usize) -> Result<Option<Frame>, InputError> {
    // The end of the file is the end of the trajectory; a frame cut short is an error.
    if reader.file.at == reader.file.len && index > 0 {
        return Ok(None);
    }
    let mut f = molly::Frame::default();
    if let Err(e) = reader.read_frame(&mut f) {
        return Err(input_error!(
            "{}: frame {index} (from byte {}): not a readable .xtc frame: {e}",
            text.path,
            reader.file.at
        ));
    }
    let n = f.natoms();
    let mut frame = empty(n, false, text.origin(index), None);
    frame.types.clear();
    for p in f.coords() {
        push(&mut frame, p.map(f64::from));
    }
    // Column-major: each column a box vector, GROMACS's (v1 along x, v2 in the xy plane).
    let [a, b, c] = f.boxvec_cols_2d().map(|v| v.map(f64::from));
    if [a, b, c].iter().flatten().any(|x| *x != 0.0) {
        if a[1] != 0.0 || a[2] != 0.0 || b[2] != 0.0 || !(a[0] > 0.0 && b[1] > 0.0 && c[2] > 0.0) {
            return Err(input_error!(
                "{}: frame {index}: box vectors {a:?}, {b:?}, {c:?} are not a GROMACS box (v1 along x, v2 in the xy plane)",
                text.path
            ));
        }
        frame.cell = Some(Cell::from_lower(a, b, c));
    }
    Ok(Some(frame))
}

/// A file that counts the bytes read from it, to tell the end of a trajectory from a cut frame.
pub struct Counted {
    file: File,
    at: u64,
    len: u64,
}

impl std::io::Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read(buf)?;
        self.at += n as u64;
        Ok(n)
    }
}

// ------------------------------------------------------------------ LAMMPS

/// A LAMMPS text dump frame (`dump custom` or `atom`): ITEM: TIMESTEP,
/// NUMBER OF ATOMS, BOX BOUNDS (orthogonal, or triclinic with `xy xz yz`),
/// ATOMS with named columns; positions from x y z, xu yu zu, xs ys zs or
/// xsu ysu zsu; atoms put in the order of their `id` where there is one.
fn lammps(text: &mut Text, index: usize) -> Result<Option<Frame>, InputError> {
    let mut n: Option<usize> = None;
    let mut cell_and_origin: Option<(Cell, [f64; 3])> = None;
    let mut header = match text.next_nonblank()? {
        None => return Ok(None),
        Some(l) => l,
    };
    loop {
        let item = header.trim().strip_prefix("ITEM:").map(str::trim).ok_or_else(|| {
            text.error(format_args!("`{}`: expected an `ITEM:` line of a LAMMPS dump", header.trim()))
        })?;
        if item.starts_with("NUMBER OF ATOMS") {
            let count = text.expect("the number of atoms")?;
            n = Some(text.count(&count, "NUMBER OF ATOMS")?);
        } else if let Some(flags) = item.strip_prefix("BOX BOUNDS") {
            let flags: Vec<&str> = flags.split_whitespace().collect();
            let triclinic = flags.first() == Some(&"xy");
            let periodic = &flags[if triclinic { 3 } else { 0 }..];
            if periodic.len() != 3 || periodic.iter().any(|f| *f != "pp") {
                return Err(text.error(format_args!(
                    "BOX BOUNDS {}: twobs's box is periodic along every axis (pp pp pp)",
                    flags.join(" ")
                )));
            }
            let mut b = [[0.0; 3]; 3];
            for row in b.iter_mut() {
                let line = text.expect("a line of box bounds")?;
                let v: Vec<f64> =
                    line.split_whitespace().map(|t| text.number(t, "BOX BOUNDS")).collect::<Result<_, _>>()?;
                let want = if triclinic { 3 } else { 2 };
                if v.len() != want {
                    return Err(
                        text.error(format_args!("{} numbers on a line of box bounds, expected {want}", v.len()))
                    );
                }
                row[..want].copy_from_slice(&v);
            }
            let (xy, xz, yz) = (b[0][2], b[1][2], b[2][2]);
            // The bounds of a triclinic box are those of its bounding box (LAMMPS's Howto triclinic).
            let xlo = b[0][0] - [0.0, xy, xz, xy + xz].into_iter().fold(f64::INFINITY, f64::min);
            let xhi = b[0][1] - [0.0, xy, xz, xy + xz].into_iter().fold(f64::NEG_INFINITY, f64::max);
            let ylo = b[1][0] - yz.min(0.0);
            let yhi = b[1][1] - yz.max(0.0);
            let (zlo, zhi) = (b[2][0], b[2][1]);
            let (lx, ly, lz) = (xhi - xlo, yhi - ylo, zhi - zlo);
            if !(lx > 0.0 && ly > 0.0 && lz > 0.0) {
                return Err(text.error(format_args!("BOX BOUNDS: lengths {lx}, {ly}, {lz}; each must be positive")));
            }
            cell_and_origin =
                Some((Cell { lengths: [lx, ly, lz], tilts: [xy / ly, xz / lz, yz / lz] }, [xlo, ylo, zlo]));
        } else if let Some(names) = item.strip_prefix("ATOMS") {
            let names: Vec<&str> = names.split_whitespace().collect();
            let n = n.ok_or_else(|| text.error(format_args!("ITEM: ATOMS before ITEM: NUMBER OF ATOMS")))?;
            let (cell, origin) =
                cell_and_origin.ok_or_else(|| text.error(format_args!("ITEM: ATOMS before ITEM: BOX BOUNDS")))?;
            return lammps_atoms(text, index, n, &names, cell, origin).map(Some);
        } else {
            // TIMESTEP, TIME, UNITS and the like: a value we do not need.
            text.expect(&format!("the value of ITEM: {item}"))?;
        }
        header = text.expect("the next ITEM: line")?;
    }
}

fn lammps_atoms(
    text: &mut Text,
    index: usize,
    n: usize,
    names: &[&str],
    cell: Cell,
    origin: [f64; 3],
) -> Result<Frame, InputError> {
    let col = |name: &str| names.iter().position(|c| *c == name);
    let (pos, scaled) = [
        (["x", "y", "z"], false),
        (["xu", "yu", "zu"], false),
        (["xs", "ys", "zs"], true),
        (["xsu", "ysu", "zsu"], true),
    ]
    .into_iter()
    .find_map(|(axes, scaled)| Some(([col(axes[0])?, col(axes[1])?, col(axes[2])?], scaled)))
    .ok_or_else(|| {
        text.error(format_args!(
            "ITEM: ATOMS {}: no positions (x y z, xu yu zu, xs ys zs or xsu ysu zsu)",
            names.join(" ")
        ))
    })?;
    let (id, ty, element, mol) = (col("id"), col("type"), col("element"), col("mol"));
    let mut frame = empty(n, mol.is_some(), text.origin(index), Some(cell));
    let mut ids = Vec::with_capacity(if id.is_some() { n } else { 0 });
    let ([lx, ly, lz], [xy, xz, yz]) = (cell.lengths, cell.tilts);
    for _ in 0..n {
        let line = text.expect(&format!("{n} atom lines"))?;
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != names.len() {
            return Err(text.error(format_args!(
                "{} fields on this atom line, expected {} ({})",
                f.len(),
                names.len(),
                names.join(" ")
            )));
        }
        let mut r = [0.0; 3];
        for k in 0..3 {
            r[k] = text.number(f[pos[k]], names[pos[k]])?;
        }
        let r = if scaled {
            // Fractional along the edge vectors, the box's corner at the origin.
            [r[0] * lx + r[1] * xy * ly + r[2] * xz * lz, r[1] * ly + r[2] * yz * lz, r[2] * lz]
        } else {
            [r[0] - origin[0], r[1] - origin[1], r[2] - origin[2]]
        };
        push(&mut frame, r);
        frame.types.push(match (element, ty) {
            (Some(e), _) => f[e].to_owned(),
            (None, Some(t)) => f[t].to_owned(),
            (None, None) => String::new(),
        });
        if let (Some(m), Some(ms)) = (mol, frame.molecules.as_mut()) {
            ms.push(text.integer(f[m], "mol")?);
        }
        if let Some(i) = id {
            ids.push(text.integer(f[i], "id")?);
        }
    }
    if id.is_some() {
        // Dumps list atoms in the order the processors hold them: by id, every frame alike.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&k| ids[k]);
        if let Some(w) = order.windows(2).find(|w| ids[w[0]] == ids[w[1]]) {
            return Err(text.error(format_args!("atom id {} appears twice in this frame", ids[w[0]])));
        }
        for c in frame.positions.iter_mut() {
            *c = order.iter().map(|&k| c[k]).collect();
        }
        frame.types = order.iter().map(|&k| std::mem::take(&mut frame.types[k])).collect();
        if let Some(ms) = frame.molecules.as_mut() {
            *ms = order.iter().map(|&k| ms[k]).collect();
        }
    }
    Ok(frame)
}

impl Frame {
    /// The positions as points of `components`, which must be three
    /// coordinates of a float type (rounded once from the f64 read).
    pub fn points(&self, components: &[Component]) -> Result<PointSet, InputError> {
        if components.len() != 3 || components.iter().any(|c| !matches!(c.scalar, Scalar::F32 | Scalar::F64)) {
            return Err(input_error!(
                "{}: an MD file holds 3-D positions, but the problem's points are {}",
                self.origin,
                components.iter().map(|c| format!("{}: {}", c.name, c.scalar)).collect::<Vec<_>>().join(", ")
            ));
        }
        let columns = components
            .iter()
            .zip(&self.positions)
            .map(|(c, v)| match c.scalar {
                Scalar::F32 => Column::F32(v.iter().map(|&x| x as f32).collect()),
                _ => Column::F64(v.clone()),
            })
            .collect();
        Ok(PointSet { columns, origin: self.origin.clone(), rows: None })
    }

    /// The atoms at `rows`, in order, as a frame of their own.
    pub fn subset(&self, rows: &[usize], origin: String) -> Frame {
        Frame {
            positions: [0, 1, 2].map(|c| rows.iter().map(|&r| self.positions[c][r]).collect()),
            cell: self.cell,
            types: rows.iter().map(|&r| self.types[r].clone()).collect(),
            molecules: self.molecules.as_ref().map(|m| rows.iter().map(|&r| m[r]).collect()),
            origin,
        }
    }
}
