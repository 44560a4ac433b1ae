// A small helper for tracediff's stdio protocol, generic layout (docs/protocol.md), with a
// msgpack subset codec written by hand (no npm): nil, booleans, integers, float64, strings,
// arrays, maps. serve(model, factories) answers hello, reset, call, state and shutdown.
"use strict";

function encode(value, out = []) {
  if (value === null || value === undefined) out.push(0xc0);
  else if (value === true) out.push(0xc3);
  else if (value === false) out.push(0xc2);
  else if (typeof value === "number" && Number.isInteger(value)) encodeInt(value, out);
  else if (typeof value === "number") {
    const b = Buffer.alloc(9);
    b[0] = 0xcb;
    b.writeDoubleBE(value, 1);
    out.push(...b);
  } else if (typeof value === "string") {
    const s = Buffer.from(value, "utf8");
    if (s.length < 32) out.push(0xa0 | s.length);
    else if (s.length < 256) out.push(0xd9, s.length);
    else if (s.length < 65536) out.push(0xda, s.length >> 8, s.length & 0xff);
    else out.push(0xdb, ...u32(s.length));
    out.push(...s);
  } else if (Array.isArray(value)) {
    header(value.length, 0x90, 0xdc, out);
    for (const item of value) encode(item, out);
  } else if (typeof value === "object") {
    const keys = Object.keys(value); // insertion order: the record's field order
    header(keys.length, 0x80, 0xde, out);
    for (const key of keys) {
      encode(key, out);
      encode(value[key], out);
    }
  } else throw new TypeError(`cannot encode ${typeof value}`);
  return out;
}

function u32(n) {
  return [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
}

function header(length, fix, wide16, out) {
  if (length < 16) out.push(fix | length);
  else if (length < 65536) out.push(wide16, length >> 8, length & 0xff);
  else out.push(wide16 + 1, ...u32(length));
}

function encodeInt(n, out) {
  // the smallest form, as tracediff's canonical encoder writes it
  if (n >= 0 && n < 128) out.push(n);
  else if (n < 0 && n >= -32) out.push(n & 0xff);
  else if (n >= 0 && n < 256) out.push(0xcc, n);
  else if (n >= 0 && n < 65536) out.push(0xcd, n >> 8, n & 0xff);
  else if (n >= 0 && n <= 0xffffffff) out.push(0xce, ...u32(n));
  else if (n >= -128 && n < 0) out.push(0xd0, n & 0xff);
  else if (n >= -32768 && n < 0) out.push(0xd1, (n >> 8) & 0xff, n & 0xff);
  else if (n >= -2147483648 && n < 0) out.push(0xd2, ...u32(n >>> 0));
  else {
    const b = Buffer.alloc(9);
    b[0] = n < 0 ? 0xd3 : 0xcf;
    if (n < 0) b.writeBigInt64BE(BigInt(n), 1);
    else b.writeBigUInt64BE(BigInt(n), 1);
    out.push(...b);
  }
}

function decode(buf) {
  let at = 0;
  const take = (n) => {
    if (at + n > buf.length) throw new Error("truncated message");
    const slice = buf.subarray(at, at + n);
    at += n;
    return slice;
  };
  const str = (n) => take(n).toString("utf8");
  const arr = (n) => Array.from({ length: n }, () => value());
  const map = (n) => {
    const m = {};
    for (let i = 0; i < n; i++) {
      const k = value();
      m[k] = value();
    }
    return m;
  };
  function value() {
    const b = take(1)[0];
    if (b < 0x80) return b;
    if (b >= 0xe0) return b - 256;
    if ((b & 0xf0) === 0x80) return map(b & 0x0f);
    if ((b & 0xf0) === 0x90) return arr(b & 0x0f);
    if ((b & 0xe0) === 0xa0) return str(b & 0x1f);
    switch (b) {
      case 0xc0: return null;
      case 0xc2: return false;
      case 0xc3: return true;
      case 0xca: return take(4).readFloatBE(0);
      case 0xcb: return take(8).readDoubleBE(0);
      case 0xcc: return take(1)[0];
      case 0xcd: return take(2).readUInt16BE(0);
      case 0xce: return take(4).readUInt32BE(0);
      case 0xcf: return Number(take(8).readBigUInt64BE(0));
      case 0xd0: return take(1).readInt8(0);
      case 0xd1: return take(2).readInt16BE(0);
      case 0xd2: return take(4).readInt32BE(0);
      case 0xd3: return Number(take(8).readBigInt64BE(0));
      case 0xd9: return str(take(1)[0]);
      case 0xda: return str(take(2).readUInt16BE(0));
      case 0xdb: return str(take(4).readUInt32BE(0));
      case 0xdc: return arr(take(2).readUInt16BE(0));
      case 0xdd: return arr(take(4).readUInt32BE(0));
      case 0xde: return map(take(2).readUInt16BE(0));
      case 0xdf: return map(take(4).readUInt32BE(0));
      default: throw new Error(`unsupported msgpack byte 0x${b.toString(16)}`);
    }
  }
  const result = value();
  if (at !== buf.length) throw new Error("trailing bytes in a message");
  return result;
}

function send(message) {
  const payload = Buffer.from(encode(message));
  const frame = Buffer.alloc(4 + payload.length);
  frame.writeUInt32BE(payload.length, 0);
  payload.copy(frame, 4);
  require("fs").writeSync(1, frame); // synchronous: a reply is out before the next read
}

// serve(model, factories, name): factories maps a scenario (the reset's to_dict()) to an
// object with the model's methods.
function serve(model, factory, name) {
  let pending = Buffer.alloc(0);
  let impl = null;
  const handle = (message) => {
    switch (message.type) {
      case "hello":
        if (!(message.versions || []).includes(1))
          return { type: "error", message: `no common version in ${message.versions}` };
        return { type: "hello", version: 1, name, model, layout: "calls", capabilities: ["state"] };
      case "reset":
        impl = null;
        impl = factory(message.scenario);
        return { type: "ok" };
      case "call": {
        if (impl === null) return { type: "error", message: "a 'call' before any 'reset'" };
        const method = impl[message.method];
        if (typeof method !== "function")
          return { type: "error", message: `no method ${message.method}` };
        const value = method.apply(impl, message.args);
        return { type: "return", value: value === undefined ? null : value };
      }
      case "state":
        return { type: "state", state: impl && impl.state ? impl.state() : {} };
      default:
        return { type: "error", message: `unknown message type ${message.type}` };
    }
  };
  process.stdin.on("data", (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 4) {
      const length = pending.readUInt32BE(0);
      if (pending.length < 4 + length) break;
      const message = decode(pending.subarray(4, 4 + length));
      pending = pending.subarray(4 + length);
      if (message.type === "shutdown") process.exit(0);
      let reply;
      try {
        reply = handle(message);
      } catch (err) {
        reply = { type: "error", message: String(err && err.stack ? err.stack : err) };
      }
      send(reply);
    }
  });
  process.stdin.on("end", () => process.exit(0));
}

module.exports = { encode, decode, serve };
