//! Molecular-dynamics inputs: the XYZ, .gro and LAMMPS readers on fresh
//! random frames, their errors, partial g(r) with pairs of one molecule
//! excluded against a brute-force count (CPU backend), and against the counts
//! MDAnalysis's InterRDF recorded on the same files
//! (bench/peer-mdanalysis.py, tests/data/md-peer/).

mod common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rand::{RngExt, SeedableRng};
use twobs::data::md::{self, Cell};

fn seed() -> u64 {
    let s = std::env::var("TWOBS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("TWOBS_TEST_SEED={s}");
    s
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn read_error(path: &Path) -> String {
    match md::read_all(path) {
        Ok(frames) => panic!("{} read as {} frames", path.display(), frames.len()),
        Err(e) => e.to_string(),
    }
}

/// An atom as written: type, molecule, position (4 decimals).
type Atom = (String, i64, [f64; 3]);

fn random_atoms(rng: &mut rand::rngs::StdRng, n: usize, box_len: f64) -> Vec<Atom> {
    (0..n)
        .map(|i| {
            let t = ["O", "H", "C"][rng.random_range(0..3usize)].to_owned();
            let r = [0; 3].map(|_| (rng.random::<f64>() * box_len * 1e4).floor() / 1e4);
            (t, (i / 3) as i64, r)
        })
        .collect()
}

fn assert_frame(frame: &md::Frame, atoms: &[Atom], shift: [f64; 3], what: &str) {
    assert_eq!(frame.len(), atoms.len(), "{what}: atoms");
    for (k, (t, _, r)) in atoms.iter().enumerate() {
        assert_eq!(&frame.types[k], t, "{what}: type of atom {k}");
        for c in 0..3 {
            let want = format!("{:.4}", r[c]).parse::<f64>().unwrap() - shift[c];
            assert_eq!(frame.positions[c][k], want, "{what}: coordinate {c} of atom {k}");
        }
    }
}

#[test]
fn xyz_gro_and_lammps_frames_read_back_as_written() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let dir = tempfile::tempdir().unwrap();
    let frames: Vec<(f64, Vec<Atom>)> = (0..3)
        .map(|_| {
            let l = 5.0 + rng.random_range(0..40) as f64 / 8.0;
            let n = rng.random_range(1..60usize) * 3;
            (l, random_atoms(&mut rng, n, l))
        })
        .collect();

    // XYZ: plain (no box), and extended with a Lattice and a mol property.
    let (mut plain, mut ext) = (String::new(), String::new());
    for (l, atoms) in &frames {
        writeln!(plain, "{}\nframe without a box", atoms.len()).unwrap();
        writeln!(
            ext,
            "{}\nLattice=\"{l} 0 0 0 {l} 0 0 0 {l}\" Properties=species:S:1:pos:R:3:mol:I:1 pbc=\"T T T\"",
            atoms.len()
        )
        .unwrap();
        for (t, m, r) in atoms {
            writeln!(plain, "{t} {:.4} {:.4} {:.4}", r[0], r[1], r[2]).unwrap();
            writeln!(ext, "{t}   {:.4}\t{:.4} {:.4}  {m}", r[0], r[1], r[2]).unwrap();
        }
    }
    let read = md::read_all(&write(dir.path(), "plain.xyz", &plain)).unwrap();
    assert_eq!(read.len(), 3);
    for (k, (f, (_, atoms))) in read.iter().zip(&frames).enumerate() {
        assert_frame(f, atoms, [0.0; 3], &format!("plain xyz frame {k}"));
        assert_eq!(f.cell, None);
        assert_eq!(f.molecules, None);
    }
    let read = md::read_all(&write(dir.path(), "ext.extxyz", &ext)).unwrap();
    for (k, (f, (l, atoms))) in read.iter().zip(&frames).enumerate() {
        assert_frame(f, atoms, [0.0; 3], &format!("extended xyz frame {k}"));
        assert_eq!(f.cell, Some(Cell { lengths: [*l; 3], tilts: [0.0; 3] }));
        assert_eq!(f.molecules.as_deref(), Some(&atoms.iter().map(|a| a.1).collect::<Vec<_>>()[..]));
    }

    // LAMMPS: the box's corner away from the origin, atoms out of order, an extra column.
    let mut dump = String::new();
    let lo = [-1.5, 0.25, 2.0];
    for (step, (l, atoms)) in frames.iter().enumerate() {
        writeln!(dump, "ITEM: TIMESTEP\n{step}\nITEM: NUMBER OF ATOMS\n{}\nITEM: BOX BOUNDS pp pp pp", atoms.len())
            .unwrap();
        for c in lo {
            writeln!(dump, "{c} {}", c + l).unwrap();
        }
        writeln!(dump, "ITEM: ATOMS id element q x y z mol").unwrap();
        let mut order: Vec<usize> = (0..atoms.len()).collect();
        order.reverse();
        for k in order {
            let (t, m, r) = &atoms[k];
            writeln!(dump, "{} {t} 0.5 {:.4} {:.4} {:.4} {m}", k + 1, r[0] + lo[0], r[1] + lo[1], r[2] + lo[2])
                .unwrap();
        }
    }
    let read = md::read_all(&write(dir.path(), "w.lammpstrj", &dump)).unwrap();
    for (k, (f, (l, atoms))) in read.iter().zip(&frames).enumerate() {
        assert_eq!(f.cell, Some(Cell { lengths: [*l; 3], tilts: [0.0; 3] }));
        assert_eq!(f.molecules.as_deref(), Some(&atoms.iter().map(|a| a.1).collect::<Vec<_>>()[..]));
        for (j, (_, _, r)) in atoms.iter().enumerate() {
            for c in 0..3 {
                let written = format!("{:.4}", r[c] + lo[c]).parse::<f64>().unwrap();
                assert_eq!(f.positions[c][j], written - lo[c], "lammps frame {k} atom {j}");
            }
        }
    }

    // .gro: residues of three atoms, residue numbers wrapping past 99999.
    let mut gro = String::new();
    for (l, atoms) in &frames {
        let nm: Vec<Atom> = atoms.iter().map(|(t, m, r)| (t.clone(), *m, r.map(|x| (x * 1e3).floor() / 1e3))).collect();
        writeln!(gro, "title t= 1.0\n{:5}", nm.len()).unwrap();
        for (k, (t, m, r)) in nm.iter().enumerate() {
            writeln!(
                gro,
                "{:5}{:<5}{:>5}{:5}{:8.3}{:8.3}{:8.3}",
                (99998 + m) % 100000,
                "SOL",
                t,
                k + 1,
                r[0],
                r[1],
                r[2]
            )
            .unwrap();
        }
        writeln!(gro, "{l:10.5}{l:10.5}{l:10.5}").unwrap();
    }
    let read = md::read_all(&write(dir.path(), "w.gro", &gro)).unwrap();
    for (k, (f, (l, atoms))) in read.iter().zip(&frames).enumerate() {
        assert_eq!(f.cell, Some(Cell { lengths: [*l; 3], tilts: [0.0; 3] }), "gro frame {k}");
        assert_eq!(f.molecules.as_deref(), Some(&atoms.iter().map(|a| a.1).collect::<Vec<_>>()[..]), "gro frame {k}");
        for (j, (t, _, r)) in atoms.iter().enumerate() {
            assert_eq!(&f.types[j], t);
            for (column, x) in f.positions.iter().zip(r) {
                assert_eq!(column[j], format!("{:.3}", (x * 1e3).floor() / 1e3).parse::<f64>().unwrap());
            }
        }
    }
}

/// Minimum-image distance in f64 for a box of edge vectors a, b, c (rows),
/// searching the images around the nearest.
fn min_image(p: [f64; 3], q: [f64; 3], e: [[f64; 3]; 3]) -> f64 {
    let mut best = f64::INFINITY;
    for i in -2..=2 {
        for j in -2..=2 {
            for k in -2..=2 {
                let d: Vec<f64> = (0..3)
                    .map(|c| p[c] - q[c] + i as f64 * e[0][c] + j as f64 * e[1][c] + k as f64 * e[2][c])
                    .collect();
                best = best.min(d.iter().map(|x| x * x).sum::<f64>().sqrt());
            }
        }
    }
    best
}

fn edges(cell: &Cell) -> [[f64; 3]; 3] {
    let ([lx, ly, lz], [xy, xz, yz]) = (cell.lengths, cell.tilts);
    [[lx, 0.0, 0.0], [xy * ly, ly, 0.0], [xz * lz, yz * lz, lz]]
}

#[test]
fn triclinic_lammps_boxes_and_rotated_xyz_lattices_keep_every_distance() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let dir = tempfile::tempdir().unwrap();
    let (lx, ly, lz) = (6.0 + rng.random::<f64>(), 5.0 + rng.random::<f64>(), 7.0 + rng.random::<f64>());
    let (xy, xz, yz) = (rng.random::<f64>() - 0.5, rng.random::<f64>() - 0.5, rng.random::<f64>() - 0.5);
    let lo = [rng.random::<f64>() - 0.5, 1.0, -2.0];
    let e = [[lx, 0.0, 0.0], [xy, ly, 0.0], [xz, yz, lz]];
    let n = 40;
    // Fractional coordinates, and the points they make in the lab frame.
    let s: Vec<[f64; 3]> = (0..n).map(|_| [0; 3].map(|_| rng.random::<f64>())).collect();
    let lab = |s: [f64; 3]| [0, 1, 2].map(|c| lo[c] + s[0] * e[0][c] + s[1] * e[1][c] + s[2] * e[2][c]);
    let bounds = [
        (
            lo[0] + [0.0, xy, xz, xy + xz].into_iter().fold(f64::INFINITY, f64::min),
            lo[0] + lx + [0.0, xy, xz, xy + xz].into_iter().fold(f64::NEG_INFINITY, f64::max),
            xy,
        ),
        (lo[1] + yz.min(0.0), lo[1] + ly + yz.max(0.0), xz),
        (lo[2], lo[2] + lz, yz),
    ];
    for (name, columns) in [("x y z", false), ("xs ys zs", true)] {
        let mut dump = format!("ITEM: TIMESTEP\n0\nITEM: NUMBER OF ATOMS\n{n}\nITEM: BOX BOUNDS xy xz yz pp pp pp\n");
        for (a, b, t) in bounds {
            writeln!(dump, "{a:?} {b:?} {t:?}").unwrap();
        }
        writeln!(dump, "ITEM: ATOMS id type {name}").unwrap();
        for (k, s) in s.iter().enumerate() {
            let r = if columns { *s } else { lab(*s) };
            writeln!(dump, "{} 1 {:?} {:?} {:?}", k + 1, r[0], r[1], r[2]).unwrap();
        }
        let f = &md::read_all(&write(dir.path(), "tri.lammpstrj", &dump)).unwrap()[0];
        let cell = f.cell.unwrap();
        for (got, want) in cell.lengths.iter().chain(&cell.tilts).zip([lx, ly, lz, xy / ly, xz / lz, yz / lz]) {
            assert!((got - want).abs() < 1e-12, "{name}: box {cell:?}");
        }
        for i in 0..n {
            for j in 0..i {
                let p = |k: usize| [0, 1, 2].map(|c| f.positions[c][k]);
                let (got, want) = (min_image(p(i), p(j), edges(&cell)), min_image(lab(s[i]), lab(s[j]), e));
                assert!((got - want).abs() < 1e-9, "{name}: atoms {i}, {j}: {got} against {want}");
            }
        }
    }
    // The same box turned about an axis, as an extended XYZ lattice.
    let (c, sn) = (0.6f64, 0.8f64);
    let turn = |v: [f64; 3]| [c * v[0] - sn * v[1], sn * v[0] + c * v[1], v[2]];
    let mut xyz = format!("{n}\nLattice=\"");
    for v in e {
        let v = turn(v);
        write!(xyz, "{:?} {:?} {:?} ", v[0], v[1], v[2]).unwrap();
    }
    xyz.push_str("\" Properties=species:S:1:pos:R:3\n");
    for s in &s {
        let r = turn(lab(*s));
        writeln!(xyz, "C {:?} {:?} {:?}", r[0], r[1], r[2]).unwrap();
    }
    let f = &md::read_all(&write(dir.path(), "turned.xyz", &xyz)).unwrap()[0];
    let cell = f.cell.unwrap();
    for (got, want) in cell.lengths.iter().chain(&cell.tilts).zip([lx, ly, lz, xy / ly, xz / lz, yz / lz]) {
        assert!((got - want).abs() < 1e-9, "turned lattice: box {cell:?}");
    }
    for i in 0..n {
        for j in 0..i {
            let p = |k: usize| [0, 1, 2].map(|c| f.positions[c][k]);
            let (got, want) = (min_image(p(i), p(j), edges(&cell)), min_image(lab(s[i]), lab(s[j]), e));
            assert!((got - want).abs() < 1e-9, "turned lattice: atoms {i}, {j}: {got} against {want}");
        }
    }
}

#[test]
fn malformed_md_files_are_refused_naming_the_file_line_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &[&str])] = &[
        ("a.xyz", "2\ncomment\nO 0 0 0\nH 1 zz 0\n", &["a.xyz:4", "`zz`", "y"]),
        ("b.xyz", "3\ncomment\nO 0 0 0\n", &["b.xyz:4", "3 atom lines"]),
        ("c.xyz", "two\ncomment\n", &["c.xyz:1", "`two`"]),
        ("d.xyz", "1\nLattice=\"1 0 0 0 1 0\"\nO 0 0 0\n", &["d.xyz:2", "9 numbers"]),
        ("e.gro", "t\n1\n    1SOL     OW    1   0.1x0   0.200   0.300\n   1 1 1\n", &["e.gro:3", "`0.1x0`", "x"]),
        ("f.gro", "t\n1\n    1SOL     OW    1   0.100   0.200   0.300\n   1 1\n", &["f.gro:4", "2 numbers"]),
        ("g.gro", "t\n1\n    1SOL     OW\n", &["g.gro:3", "characters"]),
        (
            "h.lammpstrj",
            "ITEM: TIMESTEP\n0\nITEM: NUMBER OF ATOMS\n1\nITEM: BOX BOUNDS pp pp ff\n0 1\n0 1\n0 1\nITEM: ATOMS id x y z\n1 0 0 0\n",
            &["h.lammpstrj:5", "pp pp ff"],
        ),
        (
            "i.lammpstrj",
            "ITEM: TIMESTEP\n0\nITEM: NUMBER OF ATOMS\n2\nITEM: BOX BOUNDS pp pp pp\n0 1\n0 1\n0 1\nITEM: ATOMS id x y z\n1 0 0 0\n2 0 nan 0\n",
            &["i.lammpstrj:11", "`nan`"],
        ),
        (
            "j.lammpstrj",
            "ITEM: TIMESTEP\n0\nITEM: NUMBER OF ATOMS\n1\nITEM: BOX BOUNDS pp pp pp\n0 1\n0 1\n0 1\nITEM: ATOMS id q\n1 0\n",
            &["j.lammpstrj:9", "no positions"],
        ),
        (
            "k.lammpstrj",
            "ITEM: TIMESTEP\n0\nITEM: NUMBER OF ATOMS\n2\nITEM: BOX BOUNDS pp pp pp\n0 1\n0 1\n0 1\nITEM: ATOMS id x y z\n1 0 0 0\n1 0 0 0\n",
            &["k.lammpstrj", "atom id 1 appears twice"],
        ),
        ("l.lammpstrj", "hello\n", &["l.lammpstrj:1", "ITEM:"]),
    ];
    for (name, text, wanted) in cases {
        let e = read_error(&write(dir.path(), name, text));
        for w in *wanted {
            assert!(e.contains(w), "{name}: `{e}` does not say `{w}`");
        }
    }
}

/// Molecules of three atoms (types 1, 2, 2) on a grid of 1/16 in boxes of
/// whole lengths, so that every separation and minimum image is exact in f32.
/// An atom on the grid: type, molecule, position in grid steps.
type GridAtom = (u32, i64, [u32; 3]);

fn grid_waters(rng: &mut rand::rngs::StdRng, molecules: usize, box_len: u32) -> Vec<GridAtom> {
    let cells = box_len * 16;
    let mut atoms = Vec::new();
    for m in 0..molecules {
        let o = [0; 3].map(|_| rng.random_range(0..cells));
        atoms.push((1, m as i64 + 1, o));
        for _ in 0..2 {
            atoms.push((2, m as i64 + 1, o.map(|x| (x + cells + rng.random_range(0..17u32) - 8) % cells)));
        }
    }
    atoms
}

/// The pairs of (types ta, tb) within each bucket of (bins, r_max), pairs of
/// one molecule left out where `exclude`; one set where ta == tb.
fn brute_force(
    frames: &[(u32, Vec<GridAtom>)],
    (ta, tb): (u32, u32),
    exclude: bool,
    bins: u32,
    r_max: f64,
) -> Vec<u64> {
    let mut h = vec![0u64; bins as usize];
    for (l, atoms) in frames {
        let l = *l as f64;
        let pos = |a: &GridAtom| a.2.map(|x| x as f64 / 16.0);
        for (i, a) in atoms.iter().enumerate() {
            for (j, b) in atoms.iter().enumerate() {
                let ordered = if ta == tb { i < j } else { i != j };
                if !ordered || a.0 != ta || b.0 != tb || (exclude && a.1 == b.1) {
                    continue;
                }
                let (p, q) = (pos(a), pos(b));
                let d = (0..3)
                    .map(|c| {
                        let d = p[c] - q[c];
                        let d = d - l * (d / l).round();
                        d * d
                    })
                    .sum::<f64>()
                    .sqrt();
                if d < r_max {
                    h[(d / r_max * bins as f64).floor() as usize] += 1;
                }
            }
        }
    }
    h
}

/// Buckets whose edges keep 1e-5 (relative) off every distance sqrt(k) / 16.
fn safe_bins(near: u32, r_max: f64) -> u32 {
    let d: Vec<f64> = (1..((r_max * 16.0).powi(2) as u64 + 64)).map(|k| (k as f64).sqrt() / 16.0).collect();
    (near..near + 400)
        .find(|&b| {
            let w = r_max / b as f64;
            d.iter().all(|&x| ((x / w) - (x / w).round()).abs() * w / x > 1e-5)
        })
        .expect("a safe bucket count")
}

fn counts_of(csv: &Path) -> Vec<u64> {
    std::fs::read_to_string(csv)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(2).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn partial_rdf_with_molecules_excluded_equals_a_brute_force_count_in_each_frames_box() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let dir = tempfile::tempdir().unwrap();
    // Two frames in boxes of 4 and 5: each frame's own box, an index of 4 or 5 cells an axis.
    let frames: Vec<(u32, Vec<_>)> = [4u32, 5]
        .iter()
        .map(|&l| {
            let n = rng.random_range(60..120);
            (l, grid_waters(&mut rng, n, l))
        })
        .collect();
    let mut dump = String::new();
    for (step, (l, atoms)) in frames.iter().enumerate() {
        writeln!(dump, "ITEM: TIMESTEP\n{step}\nITEM: NUMBER OF ATOMS\n{}\nITEM: BOX BOUNDS pp pp pp", atoms.len())
            .unwrap();
        for _ in 0..3 {
            writeln!(dump, "0 {l}").unwrap();
        }
        writeln!(dump, "ITEM: ATOMS id mol type x y z").unwrap();
        for (k, (t, m, r)) in atoms.iter().enumerate() {
            let x = r.map(|x| format!("{:.4}", x as f64 / 16.0));
            writeln!(dump, "{} {m} {t} {} {} {}", k + 1, x[0], x[1], x[2]).unwrap();
        }
    }
    let input = write(dir.path(), "w.lammpstrj", &dump);
    let r_max = 0.96875f32 as f64 + 0.0021;
    let r_max = r_max as f32 as f64;
    let bins = safe_bins(13, r_max);
    let mut compared = 0;
    for (types, pair) in [("1,2", (1, 2)), ("2,2", (2, 2)), ("1,1", (1, 1))] {
        for exclude in [true, false] {
            let want = brute_force(&frames, pair, exclude, bins, r_max);
            for index in ["grid", "none"] {
                let out = dir.path().join(format!("h-{}-{exclude}-{index}.csv", types.replace(',', "")));
                let mut args = vec![
                    "run".to_owned(),
                    "rdf".into(),
                    "--input".into(),
                    input.display().to_string(),
                    "--types".into(),
                    types.into(),
                    "--param".into(),
                    format!("r_max={r_max}"),
                    "--param".into(),
                    format!("bins={bins}"),
                    "--backend".into(),
                    "cpu".into(),
                    "--index".into(),
                    index.into(),
                    "--out".into(),
                    out.display().to_string(),
                ];
                if exclude {
                    args.extend(["--exclude-same".into(), "molecule".into()]);
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let o = common::twobs(dir.path(), &args);
                assert!(o.status.success(), "{types} exclude={exclude} --index {index}: {}", common::stderr(&o));
                assert_eq!(counts_of(&out), want, "{types} exclude={exclude} --index {index}");
                let said = common::stderr(&o);
                assert!(said.contains("2 boxes over 2 frames"), "{said}");
                compared += 1;
            }
        }
    }
    assert_eq!(compared, 12);
}

#[derive(serde::Deserialize)]
struct Recording {
    made_by: String,
    mdanalysis: String,
    cases: Vec<PeerCase>,
}

#[derive(serde::Deserialize)]
struct PeerCase {
    file: String,
    #[serde(default)]
    topology: Option<String>,
    types: String,
    exclude_molecule: bool,
    bins: u32,
    r_max: f64,
    frames: usize,
    both_orders: bool,
    counts: Vec<u64>,
    rdf: Vec<f64>,
}

/// MDAnalysis is not installed in CI: its InterRDF counts were recorded by
/// bench/peer-mdanalysis.py (named in the recording) on the files beside them.
#[test]
fn partial_rdf_counts_equal_mdanalysis_interrdf_as_recorded() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/md-peer");
    let rec: Recording = serde_json::from_str(&std::fs::read_to_string(data.join("mdanalysis.json")).unwrap()).unwrap();
    println!("recorded by `{}` with MDAnalysis {}", rec.made_by, rec.mdanalysis);
    let dir = tempfile::tempdir().unwrap();
    assert!(rec.cases.len() >= 8);
    assert!(rec.cases.iter().any(|c| c.file.ends_with(".xtc")), "an .xtc through its topology");
    for (k, c) in rec.cases.iter().enumerate() {
        let out = dir.path().join(format!("h{k}.csv"));
        let input = data.join(&c.file).display().to_string();
        let (r_max, bins) = (format!("r_max={}", c.r_max), format!("bins={}", c.bins));
        let mut args = vec!["run", "rdf", "--input", &input, "--types", &c.types, "--param", &r_max, "--param", &bins];
        let out_text = out.display().to_string();
        args.extend(["--backend", "cpu", "--out", &out_text]);
        if c.exclude_molecule {
            args.extend(["--exclude-same", "molecule"]);
        }
        let topology = c.topology.as_ref().map(|t| data.join(t).display().to_string());
        if let Some(t) = &topology {
            args.extend(["--topology", t]);
        }
        let o = common::twobs(dir.path(), &args);
        let what = format!("{} --types {} exclude={}", c.file, c.types, c.exclude_molecule);
        assert!(o.status.success(), "{what}: {}", common::stderr(&o));
        // InterRDF of a group with itself counts each pair from both ends.
        let theirs: Vec<u64> = c.counts.iter().map(|n| if c.both_orders { n / 2 } else { *n }).collect();
        assert!(theirs.iter().sum::<u64>() > 1000, "{what}: a test with pairs in it");
        assert_eq!(counts_of(&out), theirs, "{what}");
        // One frame: the same g(r) (InterRDF averages the volume over frames, twobs each frame's density).
        if c.frames == 1 {
            let text = std::fs::read_to_string(&out).unwrap();
            for (line, want) in text.lines().skip(1).zip(&c.rdf) {
                let g: f64 = line.split(',').nth(3).unwrap().parse().unwrap();
                assert!((g - want).abs() <= 1e-6 * want.abs().max(1.0), "{what}: g(r) {g} against {want}");
            }
        }
    }
}

#[test]
fn types_exclusion_and_ids_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let xyz = write(dir.path(), "a.xyz", "3\nLattice=\"4 0 0 0 4 0 0 0 4\"\nO 0 0 0\nH 1 1 1\nH 2 2 2\n");
    let csv = write(dir.path(), "a.csv", "0,0,0\n1,1,1\n");
    let ids = write(dir.path(), "ids.txt", "1\n2\n3\n");
    let cases: &[(&[&str], &str)] = &[
        (&["run", "rdf", "--input", "a.xyz", "--types", "N,O", "--param", "r_max=1"], "no atom of"),
        (&["run", "rdf", "--input", "a.csv", "--types", "O,H", "--param", "r_max=0.1"], "names no types of atoms"),
        (&["run", "rdf", "--input", "a.xyz", "--exclude-same", "molecule", "--param", "r_max=1"], "--id molecule=FILE"),
        (&["run", "knn", "--input", "a.csv", "--exclude-same", "molecule"], "exclusion goes with counts"),
        (
            &["run", "rdf", "--input", "a.csv", "--id", "molecule=ids.txt", "--param", "r_max=0.1"],
            "3 ids for a set of 2 points",
        ),
        (
            &["run", "rdf", "--input", "a.csv", "--id", "x=ids.txt", "--param", "r_max=0.1"],
            "is a C identifier that is not a coordinate",
        ),
        (&["run", "rdf", "--input", "a.xyz", "--types", "O,H,C", "--param", "r_max=1"], "expected A,B"),
    ];
    let _ = (&xyz, &csv, &ids);
    for (args, wanted) in cases {
        let o = common::twobs(dir.path(), args);
        let e = common::stderr(&o);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(e.contains(wanted), "{args:?}: `{e}` does not say `{wanted}`");
    }
}

/// A user's spec with `<id>` and `<exclude>`, a key map and a cutoff: its
/// promises are sampled (the moved copies take another molecule), its values
/// tested one by one, and the count equals a brute-force one.
#[test]
fn a_users_spec_excludes_pairs_of_one_molecule_and_keeps_its_promises() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "close.cu",
        "__device__ float sq(float3 a, float3 b) {\n  const float x = a.x - b.x, y = a.y - b.y, z = a.z - b.z;\n  return fmaf(z, z, fmaf(y, y, x * x));\n}\n__device__ float root(float k) { return sqrtf(k > 0.0f ? k : 0.0f); }\n__device__ float dist(float3 a, float3 b) { return root(sq(a, b)); }\n",
    );
    write(
        dir.path(),
        "close.xml",
        r#"<problem name="close"><summary>pairs of atoms of different molecules closer than r</summary>
<input sets="1" type="f32" dims="3"/>
<function file="close.cu" name="dist" symmetric="true" key="sq" map="root"/>
<output kind="count" threshold="r" compare="lt"/>
<cutoff value="r"/>
<id name="molecule"/>
<exclude same="molecule"/>
<param name="r" type="f32" default="0.1">separation below which a pair counts</param>
</problem>"#,
    );
    let n = rng.random_range(600..900);
    // Molecules of 4 atoms on the lattice of 1/16, each atom a step from the
    // one before it, so that every draw has pairs within one molecule to leave out.
    let mut pts: Vec<[f64; 3]> = Vec::with_capacity(n);
    for i in 0..n {
        let p = if i % 4 == 0 {
            [0; 3].map(|_| rng.random_range(0..64u32) as f64 / 16.0)
        } else {
            let mut p = pts[i - 1];
            let c = rng.random_range(0..3usize);
            p[c] += if p[c] < 3.9 { 1.0 / 16.0 } else { -1.0 / 16.0 };
            p
        };
        pts.push(p);
    }
    let mol: Vec<i64> = (0..n).map(|i| (i / 4) as i64).collect();
    let csv: String = pts.iter().map(|p| format!("{},{},{}\n", p[0], p[1], p[2])).collect();
    write(dir.path(), "p.csv", &csv);
    write(dir.path(), "m.txt", &mol.iter().map(|m| format!("{m}\n")).collect::<String>());
    // Halfway (in the squared distance) between two grid distances.
    let r = ((4.0f64 * 4.0 + 0.5).sqrt() / 16.0) as f32;
    let want: u64 = (0..n)
        .flat_map(|i| (0..i).map(move |j| (i, j)))
        .filter(|&(i, j)| mol[i] != mol[j])
        .filter(|&(i, j)| (0..3).map(|c| (pts[i][c] - pts[j][c]).powi(2)).sum::<f64>().sqrt() < r as f64)
        .count() as u64;
    let all: u64 = (0..n)
        .flat_map(|i| (0..i).map(move |j| (i, j)))
        .filter(|&(i, j)| (0..3).map(|c| (pts[i][c] - pts[j][c]).powi(2)).sum::<f64>().sqrt() < r as f64)
        .count() as u64;
    assert!(all > want, "the exclusion leaves out some pairs ({all} against {want})");
    for index in ["grid", "none"] {
        let r_param = format!("r={r}");
        let o = common::twobs(
            dir.path(),
            &[
                "run",
                "close.xml",
                "--input",
                "p.csv",
                "--id",
                "molecule=m.txt",
                "--param",
                &r_param,
                "--backend",
                "cpu",
                "--index",
                index,
                "--quiet",
            ],
        );
        assert!(o.status.success(), "--index {index}: {}", common::stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let got: u64 =
            out.split_whitespace().last().and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("stdout `{out}`"));
        assert_eq!(got, want, "--index {index}");
    }
}
