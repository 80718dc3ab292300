//! Scalar types and typed values of the spec.

use std::fmt;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scalar {
    F32,
    F64,
    I32,
    I64,
    U32,
}

impl Scalar {
    pub const NAMES: [&'static str; 5] = ["f32", "f64", "i32", "i64", "u32"];

    pub fn parse(name: &str) -> Option<Scalar> {
        Some(match name {
            "f32" => Scalar::F32,
            "f64" => Scalar::F64,
            "i32" => Scalar::I32,
            "i64" => Scalar::I64,
            "u32" => Scalar::U32,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Scalar::F32 => "f32",
            Scalar::F64 => "f64",
            Scalar::I32 => "i32",
            Scalar::I64 => "i64",
            Scalar::U32 => "u32",
        }
    }

    /// The CUDA C type.
    pub fn c_type(self) -> &'static str {
        match self {
            Scalar::F32 => "float",
            Scalar::F64 => "double",
            Scalar::I32 => "int",
            Scalar::I64 => "long long",
            Scalar::U32 => "unsigned",
        }
    }

    /// Prefix of the CUDA vector types (float3, int2, longlong4, ...).
    pub fn c_vector_prefix(self) -> &'static str {
        match self {
            Scalar::F32 => "float",
            Scalar::F64 => "double",
            Scalar::I32 => "int",
            Scalar::I64 => "longlong",
            Scalar::U32 => "uint",
        }
    }

    pub fn bytes(self) -> u32 {
        match self {
            Scalar::F32 | Scalar::I32 | Scalar::U32 => 4,
            Scalar::F64 | Scalar::I64 => 8,
        }
    }

    pub fn is_integer(self) -> bool {
        matches!(self, Scalar::I32 | Scalar::I64 | Scalar::U32)
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A number of a given scalar type.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    F32(f32),
    F64(f64),
    I32(i32),
    I64(i64),
    U32(u32),
    /// A periodic simulation box (parameters of `type="box"`).
    Box(PeriodicBox),
}

impl Value {
    /// Parses `text` as a `scalar`, rounding decimals once, to the nearest value of the type.
    pub fn parse(scalar: Scalar, text: &str) -> Result<Value, String> {
        let t = text.trim();
        let whole = || format!("expected a whole number ({scalar}), found `{t}`");
        // A number too large for its type is named as written, not as the infinity it rounds to.
        let fits = |infinite: bool| -> Result<(), String> {
            let named_infinity = t.trim_start_matches(['+', '-']).to_ascii_lowercase().starts_with("inf");
            if infinite && !named_infinity {
                let largest = if scalar == Scalar::F32 { format!("{:e}", f32::MAX) } else { format!("{:e}", f64::MAX) };
                return Err(format!("{t} does not fit {scalar} (whose largest magnitude is {largest})"));
            }
            Ok(())
        };
        Ok(match scalar {
            Scalar::F32 => {
                let v = t.parse::<f32>().map_err(|_| format!("expected a number (f32), found `{t}`"))?;
                fits(v.is_infinite())?;
                Value::F32(v)
            }
            Scalar::F64 => {
                let v = t.parse::<f64>().map_err(|_| format!("expected a number (f64), found `{t}`"))?;
                fits(v.is_infinite())?;
                Value::F64(v)
            }
            Scalar::I32 => Value::I32(t.parse::<i32>().map_err(|_| whole())?),
            Scalar::I64 => Value::I64(t.parse::<i64>().map_err(|_| whole())?),
            Scalar::U32 => Value::U32(t.parse::<u32>().map_err(|_| whole())?),
        })
    }

    pub fn scalar(self) -> Scalar {
        match self {
            Value::Box(b) => b.scalar,
            Value::F32(_) => Scalar::F32,
            Value::F64(_) => Scalar::F64,
            Value::I32(_) => Scalar::I32,
            Value::I64(_) => Scalar::I64,
            Value::U32(_) => Scalar::U32,
        }
    }

    /// The number. Operands are numbers: the spec reader refuses a box parameter as one.
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Box(_) => unreachable!("a box is not a number; the spec reader keeps it out of operands"),
            Value::F32(v) => v as f64,
            Value::F64(v) => v,
            Value::I32(v) => v as f64,
            Value::I64(v) => v as f64,
            Value::U32(v) => v as f64,
        }
    }

    pub fn is_finite(self) -> bool {
        match self {
            Value::Box(b) => b.lengths.iter().chain(&b.tilts).all(|x| x.is_finite()),
            v => v.as_f64().is_finite(),
        }
    }

    /// Converts to `scalar` the way C's static_cast would (floats truncate toward zero).
    pub fn cast(self, scalar: Scalar) -> Value {
        match (self, scalar) {
            (v, s) if v.scalar() == s => return v,
            (Value::Box(b), s) => return Value::Box(PeriodicBox { scalar: s, ..b }),
            _ => {}
        }
        let wide = self.as_f64();
        match (self, scalar) {
            (Value::F32(v), Scalar::F64) => Value::F64(v as f64),
            (_, Scalar::F32) => Value::F32(wide as f32),
            (_, Scalar::F64) => Value::F64(wide),
            (Value::I64(v), Scalar::I32) => Value::I32(v as i32),
            (Value::U32(v), Scalar::I64) => Value::I64(v as i64),
            (Value::I32(v), Scalar::I64) => Value::I64(v as i64),
            (_, Scalar::I32) => Value::I32(wide as i32),
            (_, Scalar::I64) => Value::I64(wide as i64),
            (_, Scalar::U32) => Value::U32(wide as u32),
        }
    }

    /// The CUDA type of a constant holding this value.
    pub fn c_type(self) -> String {
        match self {
            Value::Box(b) => b.c_type(),
            v => v.scalar().c_type().to_owned(),
        }
    }

    /// A C literal that denotes exactly this value: Rust prints the shortest
    /// decimal that reads back to the same float, and C reads it back the same.
    pub fn c_literal(self) -> String {
        match self {
            Value::F32(v) => format!("{v:?}f"),
            Value::F64(v) => format!("{v:?}"),
            Value::I32(v) => format!("{v}"),
            Value::I64(v) => format!("{v}LL"),
            Value::U32(v) => format!("{v}u"),
            Value::Box(b) => {
                let n = |x: f64| Value::F64(x).cast(b.scalar).c_literal();
                let all: Vec<String> = b.lengths.iter().chain(&b.tilts).map(|&x| n(x)).collect();
                format!("{}{{{}}}", b.c_type(), all.join(", "))
            }
        }
    }
}

/// Whether a float reads better with an exponent: Rust writes every digit
/// otherwise (`0.0000000000000000000000000000001` for 1e-31).
fn far_from_one(x: f64) -> bool {
    x != 0.0 && x.is_finite() && !(1e-4..1e16).contains(&x.abs())
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::F32(v) if far_from_one(f64::from(*v)) => write!(f, "{v:e}"),
            Value::F64(v) if far_from_one(*v) => write!(f, "{v:e}"),
            Value::F32(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::I32(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::U32(v) => write!(f, "{v}"),
            Value::Box(b) => write!(f, "{b}"),
        }
    }
}

/// A periodic simulation box in the convention of HOOMD-blue and freud: edge
/// vectors a1 = (Lx, 0, 0), a2 = (xy Ly, Ly, 0), a3 = (xz Lz, yz Lz, Lz), with
/// dimensionless tilt factors, spanning [0, 1) in fractional coordinates from
/// the origin. All lengths 0 means open boundaries (no box).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PeriodicBox {
    /// The type of its numbers in the kernel (f32, or f64 in the CPU's f64 mode).
    #[serde(skip)]
    pub scalar: Scalar,
    /// Lx, Ly, Lz, rounded to `scalar`.
    pub lengths: [f64; 3],
    /// xy, xz, yz, rounded to `scalar`.
    pub tilts: [f64; 3],
}

impl PeriodicBox {
    /// `L` (a cube; 0 for open boundaries), `Lx,Ly,Lz` (orthorhombic) or
    /// `Lx,Ly,Lz,xy,xz,yz` (triclinic), each number rounded once to `scalar`.
    pub fn parse(scalar: Scalar, text: &str) -> Result<PeriodicBox, String> {
        let numbers = text
            .split(',')
            .map(|t| match Value::parse(scalar, t)? {
                v if v.is_finite() => Ok(v.as_f64()),
                _ => Err(format!("box numbers must be finite, found `{}`", t.trim())),
            })
            .collect::<Result<Vec<f64>, String>>()?;
        let (lengths, tilts) = match numbers[..] {
            [l] => ([l; 3], [0.0; 3]),
            [x, y, z] => ([x, y, z], [0.0; 3]),
            [x, y, z, xy, xz, yz] => ([x, y, z], [xy, xz, yz]),
            _ => {
                return Err(format!(
                    "a box is L, Lx,Ly,Lz or Lx,Ly,Lz,xy,xz,yz (HOOMD/freud tilt factors); `{}` has {} numbers",
                    text.trim(),
                    numbers.len()
                ));
            }
        };
        let b = PeriodicBox { scalar, lengths, tilts };
        if b.is_open() {
            if tilts.iter().any(|t| *t != 0.0) {
                return Err(format!("an open box (lengths 0) has no tilt; found `{}`", text.trim()));
            }
        } else if lengths.iter().any(|l| *l <= 0.0) {
            return Err(format!(
                "box lengths must all be positive (or all 0 for open boundaries); found `{}`",
                text.trim()
            ));
        }
        Ok(b)
    }

    pub fn is_open(&self) -> bool {
        self.lengths == [0.0; 3]
    }

    /// The CUDA type of the constant (`templates/common/types.cu` defines it).
    pub fn c_type(&self) -> String {
        format!("PeriodicBox<{}>", self.scalar.c_type())
    }

    /// The edge vectors a1, a2, a3.
    pub fn edges(&self) -> [[f64; 3]; 3] {
        let ([lx, ly, lz], [xy, xz, yz]) = (self.lengths, self.tilts);
        [[lx, 0.0, 0.0], [xy * ly, ly, 0.0], [xz * lz, yz * lz, lz]]
    }

    pub fn volume(&self) -> f64 {
        self.lengths.iter().product()
    }

    /// The distance between opposite faces, for each pair of faces: a sphere
    /// of radius r fits the box when 2r is at most the smallest of them.
    pub fn widths(&self) -> [f64; 3] {
        let [a, b, c] = self.edges();
        let cross = |u: [f64; 3], v: [f64; 3]| {
            [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]]
        };
        let norm = |u: [f64; 3]| u.iter().map(|x| x * x).sum::<f64>().sqrt();
        let v = self.volume();
        [v / norm(cross(b, c)), v / norm(cross(c, a)), v / norm(cross(a, b))]
    }

    /// Whether an edge leans (any tilt factor is not 0).
    pub fn is_triclinic(&self) -> bool {
        self.tilts.iter().any(|&t| t != 0.0)
    }

    /// The unit normal of each pair of faces (to a2 and a3, a3 and a1, a1
    /// and a2): n_k . r is fractional coordinate k times width k, so two
    /// points whose separation has length d lie at most d apart along it.
    /// Rows of the edge matrix's inverse (upper triangular), scaled to length 1.
    pub fn normals(&self) -> [[f64; 3]; 3] {
        let ([lx, ly, lz], [xy, xz, yz]) = (self.lengths, self.tilts);
        let rows = [[1.0 / lx, -xy / lx, (xy * yz - xz) / lx], [0.0, 1.0 / ly, -yz / ly], [0.0, 0.0, 1.0 / lz]];
        rows.map(|h| {
            let norm = h.iter().map(|x| x * x).sum::<f64>().sqrt();
            h.map(|x| x / norm)
        })
    }

    /// Fractional coordinates of a point (a1, a2, a3 components).
    pub fn fractional(&self, r: [f64; 3]) -> [f64; 3] {
        // The edge matrix is upper triangular: solve from z up.
        let ([lx, ly, lz], [xy, xz, yz]) = (self.lengths, self.tilts);
        let s3 = r[2] / lz;
        let s2 = (r[1] - s3 * yz * lz) / ly;
        let s1 = (r[0] - s2 * xy * ly - s3 * xz * lz) / lx;
        [s1, s2, s3]
    }

    /// The point of fractional coordinates `s`.
    pub fn cartesian(&self, s: [f64; 3]) -> [f64; 3] {
        let e = self.edges();
        [0, 1, 2].map(|k| s[0] * e[0][k] + s[1] * e[1][k] + s[2] * e[2][k])
    }
}

/// When a box's numbers reach the generated code: folded into it as
/// constants (`Compile`: one kernel per box, its arithmetic folded away where
/// a length is 1 or a tilt 0), or read from memory the runner sets before
/// each launch or CPU run (`Run`: one kernel for every box, which an NPT
/// trajectory or a session's changing box needs). The runner picks it
/// (`run::execute_frames`, the Python session); docs/planner.md, "The box".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoxTime {
    #[default]
    Compile,
    Run,
}

impl BoxTime {
    pub fn is_compile(&self) -> bool {
        *self == BoxTime::Compile
    }

    pub fn name(self) -> &'static str {
        match self {
            BoxTime::Compile => "compile time",
            BoxTime::Run => "run time",
        }
    }
}

impl PeriodicBox {
    /// The numbers of `RunTimeBox<T>` (`templates/common/types.cu`), in its
    /// order: lx, ly, lz, xy, xz, yz, then 1/lx, 1/ly, 1/lz, xy ly, xz lz, yz lz,
    /// each derived one rounded once in the box's type, as the compiler folds
    /// them for a box known at compile time (so both give the same bits).
    pub fn run_time_numbers(&self) -> [f64; 12] {
        let ([lx, ly, lz], [xy, xz, yz]) = (self.lengths, self.tilts);
        match self.scalar {
            Scalar::F32 => {
                let [lx, ly, lz, xy, xz, yz] = [lx, ly, lz, xy, xz, yz].map(|x| x as f32);
                let derived = [1.0 / lx, 1.0 / ly, 1.0 / lz, xy * ly, xz * lz, yz * lz];
                let mut all = [lx, ly, lz, xy, xz, yz].map(f64::from).to_vec();
                all.extend(derived.map(f64::from));
                all.try_into().expect("twelve numbers")
            }
            _ => [lx, ly, lz, xy, xz, yz, 1.0 / lx, 1.0 / ly, 1.0 / lz, xy * ly, xz * lz, yz * lz],
        }
    }
}

impl fmt::Display for PeriodicBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = |x: f64| Value::F64(x).cast(self.scalar).to_string();
        let [x, y, z] = self.lengths;
        if self.tilts != [0.0; 3] {
            let [a, b, c] = self.tilts;
            write!(f, "{},{},{},{},{},{}", n(x), n(y), n(z), n(a), n(b), n(c))
        } else if x == y && y == z {
            write!(f, "{}", n(x))
        } else {
            write!(f, "{},{},{}", n(x), n(y), n(z))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Value;

    #[test]
    fn floats_far_from_one_are_written_with_an_exponent() {
        assert_eq!(Value::F32(1e-31).to_string(), "1e-31");
        assert_eq!(Value::F64(3e20).to_string(), "3e20");
        assert_eq!(Value::F32(0.1).to_string(), "0.1");
        assert_eq!(Value::F32(1.7320508).to_string(), "1.7320508");
        assert_eq!(Value::F64(0.0).to_string(), "0");
        // The C literals are untouched: the shortest decimal that reads back the same.
        assert_eq!(Value::F32(1e-31).c_literal(), "1e-31f");
    }
}
