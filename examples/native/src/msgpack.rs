//! A small msgpack codec: the subset tracediff's protocol uses (nil, bool, integers,
//! float32/64, str, bin, array, map). Maps keep their order; floats are written as
//! float64 always, integers in their smallest form, as tracediff's canonical packer does.

use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Bin(Vec<u8>),
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
}

#[derive(Debug)]
pub struct DecodeError(pub String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

const MAX_DEPTH: usize = 64;

impl Value {
    pub fn get(&self, key: &str) -> Option<&Value> {
        if let Value::Map(entries) = self {
            for (k, v) in entries {
                if let Value::Str(s) = k {
                    if s == key {
                        return Some(v);
                    }
                }
            }
        }
        None
    }
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(x) => Some(*x),
            Value::Int(i) => Some(*i as f64),
            _ => None,
        }
    }
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// Builds a map with string keys in the order given.
pub fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(entries.into_iter().map(|(k, v)| (Value::Str(k.to_string()), v)).collect())
}

pub fn str_value(text: &str) -> Value {
    Value::Str(text.to_string())
}

pub fn int_array(items: &[i64]) -> Value {
    Value::Array(items.iter().map(|&i| Value::Int(i)).collect())
}

// -- encoding ---------------------------------------------------------------------------
pub fn encode(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Nil => out.push(0xc0),
        Value::Bool(false) => out.push(0xc2),
        Value::Bool(true) => out.push(0xc3),
        Value::Int(i) => encode_int(*i, out),
        Value::Float(x) => {
            out.push(0xcb);
            out.extend_from_slice(&x.to_bits().to_be_bytes());
        }
        Value::Str(s) => {
            let n = s.len();
            if n < 32 {
                out.push(0xa0 | n as u8);
            } else if n < 256 {
                out.push(0xd9);
                out.push(n as u8);
            } else if n < 65536 {
                out.push(0xda);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(s.as_bytes());
        }
        Value::Bin(b) => {
            let n = b.len();
            if n < 256 {
                out.push(0xc4);
                out.push(n as u8);
            } else if n < 65536 {
                out.push(0xc5);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                out.push(0xc6);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(b);
        }
        Value::Array(items) => {
            container_header(items.len(), 0x90, 0xdc, 0xdd, out);
            for item in items {
                encode(item, out);
            }
        }
        Value::Map(entries) => {
            container_header(entries.len(), 0x80, 0xde, 0xdf, out);
            for (k, v) in entries {
                encode(k, out);
                encode(v, out);
            }
        }
    }
}

fn container_header(n: usize, fix: u8, c16: u8, c32: u8, out: &mut Vec<u8>) {
    if n < 16 {
        out.push(fix | n as u8);
    } else if n < 65536 {
        out.push(c16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(c32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode_int(i: i64, out: &mut Vec<u8>) {
    if (0..128).contains(&i) {
        out.push(i as u8);
    } else if (-32..0).contains(&i) {
        out.push(i as i8 as u8);
    } else if i >= 0 {
        if i < 256 {
            out.push(0xcc);
            out.push(i as u8);
        } else if i < 65536 {
            out.push(0xcd);
            out.extend_from_slice(&(i as u16).to_be_bytes());
        } else if i < 1 << 32 {
            out.push(0xce);
            out.extend_from_slice(&(i as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(i as u64).to_be_bytes());
        }
    } else if i >= -128 {
        out.push(0xd0);
        out.push(i as i8 as u8);
    } else if i >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(i as i16).to_be_bytes());
    } else if i >= -(1 << 31) {
        out.push(0xd2);
        out.extend_from_slice(&(i as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&i.to_be_bytes());
    }
}

// -- decoding ---------------------------------------------------------------------------
pub fn decode(data: &[u8]) -> Result<Value, DecodeError> {
    let mut reader = Reader { data, pos: 0 };
    let value = reader.value(0)?;
    if reader.pos != data.len() {
        return Err(DecodeError(format!("{} extra bytes after the message", data.len() - reader.pos)));
    }
    Ok(value)
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.data.len() - self.pos < n {
            return Err(DecodeError(format!("truncated at byte {}", self.pos)));
        }
        let slice = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(slice)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for &b in self.take(n)? {
            v = (v << 8) | b as u64;
        }
        Ok(v)
    }
    fn string(&mut self, n: usize) -> Result<Value, DecodeError> {
        let bytes = self.take(n)?;
        String::from_utf8(bytes.to_vec())
            .map(Value::Str)
            .map_err(|_| DecodeError("invalid UTF-8 in a string".into()))
    }
    fn array(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        if n > self.data.len() - self.pos {
            return Err(DecodeError("an array longer than the message".into()));
        }
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(items))
    }
    fn map(&mut self, n: usize, depth: usize) -> Result<Value, DecodeError> {
        if n > self.data.len() - self.pos {
            return Err(DecodeError("a map longer than the message".into()));
        }
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.value(depth + 1)?;
            let v = self.value(depth + 1)?;
            entries.push((k, v));
        }
        Ok(Value::Map(entries))
    }
    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError("nested too deeply".into()));
        }
        let marker = self.u8()?;
        Ok(match marker {
            0x00..=0x7f => Value::Int(marker as i64),
            0x80..=0x8f => return self.map((marker & 0x0f) as usize, depth),
            0x90..=0x9f => return self.array((marker & 0x0f) as usize, depth),
            0xa0..=0xbf => return self.string((marker & 0x1f) as usize),
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4 | 0xc5 | 0xc6 => {
                let n = self.be(1 << (marker - 0xc4))? as usize;
                Value::Bin(self.take(n)?.to_vec())
            }
            0xca => Value::Float(f32::from_bits(self.be(4)? as u32) as f64),
            0xcb => Value::Float(f64::from_bits(self.be(8)?)),
            0xcc => Value::Int(self.be(1)? as i64),
            0xcd => Value::Int(self.be(2)? as i64),
            0xce => Value::Int(self.be(4)? as i64),
            0xcf => {
                let v = self.be(8)?;
                if v > i64::MAX as u64 {
                    return Err(DecodeError("an integer beyond i64".into()));
                }
                Value::Int(v as i64)
            }
            0xd0 => Value::Int(self.be(1)? as u8 as i8 as i64),
            0xd1 => Value::Int(self.be(2)? as u16 as i16 as i64),
            0xd2 => Value::Int(self.be(4)? as u32 as i32 as i64),
            0xd3 => Value::Int(self.be(8)? as i64),
            0xd9 => {
                let n = self.be(1)? as usize;
                return self.string(n);
            }
            0xda => {
                let n = self.be(2)? as usize;
                return self.string(n);
            }
            0xdb => {
                let n = self.be(4)? as usize;
                return self.string(n);
            }
            0xdc => {
                let n = self.be(2)? as usize;
                return self.array(n, depth);
            }
            0xdd => {
                let n = self.be(4)? as usize;
                return self.array(n, depth);
            }
            0xde => {
                let n = self.be(2)? as usize;
                return self.map(n, depth);
            }
            0xdf => {
                let n = self.be(4)? as usize;
                return self.map(n, depth);
            }
            0xe0..=0xff => Value::Int(marker as i8 as i64),
            other => return Err(DecodeError(format!("unsupported msgpack marker 0x{:02x}", other))),
        })
    }
}
