//! Typed columns (docs/trace-format.md, "Typed columns"): the five wide tables of a plan
//! record as msgpack bins of little-endian values, the form tracediff records. Sending them
//! this way spares the harness converting rows into columns for every plan.
//!
//! The scheduler builds rows (`Value::Array` per row, in column order) because its
//! decisions read them that way; `table` transposes them once at the end of `plan()`.

use crate::msgpack::Value;

#[derive(Clone, Copy)]
pub enum Col {
    Bool,
    U8,
    I8,
    I16,
    I32,
    I64,
    F64,
    F64x7,
    U8Ragged,
}

pub const ELIGIBLE: &[Col] = &[Col::I32, Col::I16, Col::U8, Col::I8, Col::U8, Col::I32, Col::F64x7];
pub const CANDIDATES: &[Col] = &[
    Col::I32, Col::U8, Col::I16, Col::Bool, Col::U8, Col::I16, Col::I16,
    Col::U8Ragged, Col::F64, Col::I64, Col::F64, Col::I16,
];
pub const PRUNED: &[Col] = &[Col::I32, Col::I32];
pub const PROBES: &[Col] = &[Col::I16, Col::I32, Col::U8, Col::I32, Col::F64, Col::F64, Col::I64, Col::F64];
pub const LANE_VALUES: &[Col] = &[Col::I32, Col::F64, Col::F64, Col::I64];

fn int(v: &Value) -> Result<i64, String> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::Bool(b) => Ok(*b as i64),
        other => Err(format!("expected an integer, got {:?}", other)),
    }
}

fn float(v: &Value) -> Result<f64, String> {
    v.as_f64().ok_or_else(|| format!("expected a float, got {:?}", v))
}

/// Checks that `i` fits `bits` (signed or not) and appends its low bytes.
fn push_int(out: &mut Vec<u8>, i: i64, bytes: usize, signed: bool) -> Result<(), String> {
    let bits = 8 * bytes as u32;
    let fits = if signed {
        bits == 64 || (i >= -(1i64 << (bits - 1)) && i < (1i64 << (bits - 1)))
    } else {
        i >= 0 && (bits == 64 || i < (1i64 << bits))
    };
    if !fits {
        return Err(format!("{} does not fit a {}{} column", i, if signed { "i" } else { "u" }, bits));
    }
    out.extend_from_slice(&i.to_le_bytes()[..bytes]);
    Ok(())
}

/// `rows` (each an array in column order) as the table's columns.
pub fn table(name: &str, types: &[Col], rows: &[Value]) -> Result<Value, String> {
    let mut columns: Vec<Vec<u8>> = vec![Vec::new(); types.len()];
    let mut lengths: Vec<Vec<u8>> = vec![Vec::new(); types.len()];
    for (r, row) in rows.iter().enumerate() {
        let cells = row.as_array().filter(|c| c.len() == types.len());
        let cells = cells.ok_or_else(|| format!("{}[{}] is not a row of {} values", name, r, types.len()))?;
        for (c, (kind, cell)) in types.iter().zip(cells).enumerate() {
            let out = &mut columns[c];
            let problem = |e: String| format!("{}[{}][{}]: {}", name, r, c, e);
            match kind {
                Col::Bool => out.push(match cell {
                    Value::Bool(b) => *b as u8,
                    other => return Err(problem(format!("expected a bool, got {:?}", other))),
                }),
                Col::U8 => push_int(out, int(cell).map_err(problem)?, 1, false).map_err(problem)?,
                Col::I8 => push_int(out, int(cell).map_err(problem)?, 1, true).map_err(problem)?,
                Col::I16 => push_int(out, int(cell).map_err(problem)?, 2, true).map_err(problem)?,
                Col::I32 => push_int(out, int(cell).map_err(problem)?, 4, true).map_err(problem)?,
                Col::I64 => push_int(out, int(cell).map_err(problem)?, 8, true).map_err(problem)?,
                Col::F64 => out.extend_from_slice(&float(cell).map_err(problem)?.to_le_bytes()),
                Col::F64x7 => {
                    let items = cell.as_array().filter(|a| a.len() == 7);
                    for item in items.ok_or_else(|| problem("expected 7 floats".into()))? {
                        out.extend_from_slice(&float(item).map_err(problem)?.to_le_bytes());
                    }
                }
                Col::U8Ragged => {
                    let items = cell.as_array().ok_or_else(|| problem("expected a list".into()))?;
                    push_int(&mut lengths[c], items.len() as i64, 2, false).map_err(problem)?;
                    for item in items {
                        push_int(out, int(item).map_err(problem)?, 1, false).map_err(problem)?;
                    }
                }
            }
        }
    }
    let built = types
        .iter()
        .zip(columns.into_iter().zip(lengths))
        .map(|(kind, (values, lengths))| match kind {
            Col::U8Ragged => Value::Array(vec![Value::Bin(lengths), Value::Bin(values)]),
            _ => Value::Bin(values),
        })
        .collect();
    Ok(Value::Array(built))
}

/// A table built column by column, straight from the scheduler's values (no row values):
/// the optimized scheduler's way, as the Python one packs its columns directly.
pub struct Builder {
    types: &'static [Col],
    columns: Vec<Vec<u8>>,
    lengths: Vec<Vec<u8>>,
    problem: Option<String>,
}

impl Builder {
    pub fn new(types: &'static [Col], rows: usize) -> Builder {
        let columns = types.iter().map(|t| Vec::with_capacity(rows * width(*t))).collect();
        Builder { types, columns, lengths: vec![Vec::new(); types.len()], problem: None }
    }

    /// An integer of column `c` (any integer type; range-checked).
    pub fn int(&mut self, c: usize, value: i64) {
        let (bytes, signed) = match self.types[c] {
            Col::Bool | Col::U8 => (1, false),
            Col::I8 => (1, true),
            Col::I16 => (2, true),
            Col::I32 => (4, true),
            _ => (8, true),
        };
        if let Err(e) = push_int(&mut self.columns[c], value, bytes, signed) {
            self.problem.get_or_insert(format!("column {}: {}", c, e));
        }
    }

    pub fn float(&mut self, c: usize, value: f64) {
        self.columns[c].extend_from_slice(&value.to_le_bytes());
    }

    pub fn floats(&mut self, c: usize, values: &[f64]) {
        for v in values {
            self.columns[c].extend_from_slice(&v.to_le_bytes());
        }
    }

    /// One row of a ragged u8 column.
    pub fn ragged(&mut self, c: usize, values: &[i64]) {
        let result = push_int(&mut self.lengths[c], values.len() as i64, 2, false)
            .and_then(|_| values.iter().try_for_each(|&v| push_int(&mut self.columns[c], v, 1, false)));
        if let Err(e) = result {
            self.problem.get_or_insert(format!("column {}: {}", c, e));
        }
    }

    pub fn finish(self, name: &str) -> Result<Value, String> {
        if let Some(problem) = self.problem {
            return Err(format!("{}: {}", name, problem));
        }
        let built = self
            .types
            .iter()
            .zip(self.columns.into_iter().zip(self.lengths))
            .map(|(kind, (values, lengths))| match kind {
                Col::U8Ragged => Value::Array(vec![Value::Bin(lengths), Value::Bin(values)]),
                _ => Value::Bin(values),
            })
            .collect();
        Ok(Value::Array(built))
    }
}

fn width(kind: Col) -> usize {
    match kind {
        Col::Bool | Col::U8 | Col::I8 | Col::U8Ragged => 1,
        Col::I16 => 2,
        Col::I32 => 4,
        Col::I64 | Col::F64 => 8,
        Col::F64x7 => 56,
    }
}
