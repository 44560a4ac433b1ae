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
