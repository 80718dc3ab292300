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

    /// A little-endian value of this type, as f64.
    pub fn decode_f64(self, bytes: &[u8]) -> f64 {
        let b = |n: usize| -> [u8; 8] {
            let mut w = [0u8; 8];
            w[..n].copy_from_slice(&bytes[..n]);
            w
        };
        match self {
            Scalar::F32 => f32::from_le_bytes(b(4)[..4].try_into().expect("4 bytes")) as f64,
            Scalar::F64 => f64::from_le_bytes(b(8)),
            Scalar::I32 => i32::from_le_bytes(b(4)[..4].try_into().expect("4 bytes")) as f64,
            Scalar::I64 => i64::from_le_bytes(b(8)) as f64,
            Scalar::U32 => u32::from_le_bytes(b(4)[..4].try_into().expect("4 bytes")) as f64,
        }
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
}

impl Value {
    /// Parses `text` as a `scalar`, rounding decimals once, to the nearest value of the type.
    pub fn parse(scalar: Scalar, text: &str) -> Result<Value, String> {
        let t = text.trim();
        let whole = || format!("expected a whole number ({scalar}), found `{t}`");
        Ok(match scalar {
            Scalar::F32 => Value::F32(t.parse::<f32>().map_err(|_| format!("expected a number (f32), found `{t}`"))?),
            Scalar::F64 => Value::F64(t.parse::<f64>().map_err(|_| format!("expected a number (f64), found `{t}`"))?),
            Scalar::I32 => Value::I32(t.parse::<i32>().map_err(|_| whole())?),
            Scalar::I64 => Value::I64(t.parse::<i64>().map_err(|_| whole())?),
            Scalar::U32 => Value::U32(t.parse::<u32>().map_err(|_| whole())?),
        })
    }

    pub fn scalar(self) -> Scalar {
        match self {
            Value::F32(_) => Scalar::F32,
            Value::F64(_) => Scalar::F64,
            Value::I32(_) => Scalar::I32,
            Value::I64(_) => Scalar::I64,
            Value::U32(_) => Scalar::U32,
        }
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Value::F32(v) => v as f64,
            Value::F64(v) => v,
            Value::I32(v) => v as f64,
            Value::I64(v) => v as f64,
            Value::U32(v) => v as f64,
        }
    }

    pub fn is_finite(self) -> bool {
        self.as_f64().is_finite()
    }

    /// Converts to `scalar` the way C's static_cast would (floats truncate toward zero).
    pub fn cast(self, scalar: Scalar) -> Value {
        let wide = self.as_f64();
        match (self, scalar) {
            (v, s) if v.scalar() == s => v,
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

    /// A C literal that denotes exactly this value: Rust prints the shortest
    /// decimal that reads back to the same float, and C reads it back the same.
    pub fn c_literal(self) -> String {
        match self {
            Value::F32(v) => format!("{v:?}f"),
            Value::F64(v) => format!("{v:?}"),
            Value::I32(v) => format!("{v}"),
            Value::I64(v) => format!("{v}LL"),
            Value::U32(v) => format!("{v}u"),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::F32(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::I32(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::U32(v) => write!(f, "{v}"),
        }
    }
}
