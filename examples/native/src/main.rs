//! tracediff's reference scheduler as a native process speaking tracediff's stdio protocol
//! (docs/protocol.md): u32 big-endian length + one msgpack map per message, one reply per
//! request. Run it with
//!
//!     tracediff run --impl reference --impl 'exec:examples/native/target/release/tracediff-native'

mod columns;
mod msgpack;
mod sched;

use msgpack::{map, str_value, Value};
use sched::Scheduler;
use std::io::{self, Read, Write};
use std::time::Instant;

const MAX_MESSAGE: usize = 64 * 1024 * 1024;
/// The protocol versions this port speaks, newest first. Version 2: the harness writes a
/// step's requests at once and a `plan` may carry a `count` (answered by up to that many
/// `plan` replies); replies are flushed when no request is left to read.
const VERSIONS: [i64; 2] = [2, 1];

fn read_message(input: &mut impl Read) -> Result<Option<Value>, String> {
    let mut prefix = [0u8; 4];
    match input.read_exact(&mut prefix) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(format!("reading stdin: {}", e)),
    }
    let length = u32::from_be_bytes(prefix) as usize;
    if length > MAX_MESSAGE {
        return Err(format!("a message of {} bytes is over the limit", length));
    }
    let mut payload = vec![0u8; length];
    input.read_exact(&mut payload).map_err(|e| format!("stdin ended inside a message: {}", e))?;
    msgpack::decode(&payload).map(Some).map_err(|e| format!("undecodable message: {}", e))
}

fn write_message(output: &mut impl Write, message: &Value) -> io::Result<()> {
    let mut payload = Vec::with_capacity(4096);
    msgpack::encode(message, &mut payload);
    output.write_all(&(payload.len() as u32).to_be_bytes())?;
    output.write_all(&payload)
}

fn error(text: String) -> Value {
    map(vec![("type", str_value("error")), ("message", Value::Str(text))])
}

fn ok() -> Value {
    map(vec![("type", str_value("ok"))])
}

/// This thread's CPU time in ns (Linux clock_gettime(CLOCK_THREAD_CPUTIME_ID), std only).
fn thread_cpu_ns() -> i64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: clock_gettime writes one timespec to the pointer it is given.
    let rc = unsafe { clock_gettime(3, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.sec * 1_000_000_000 + ts.nsec
}

struct Session {
    scenario: Option<Value>,
    scheduler: Option<Scheduler>,
    version: i64,
    optimized: bool, // --optimized: sched/optimized.rs instead of the reference
}

impl Session {
    fn handle(&mut self, message: &Value) -> Result<Value, String> {
        let kind = message.get("type").and_then(Value::as_str).ok_or("a message without a string 'type'")?;
        let now = || message.get("now").and_then(Value::as_i64).ok_or_else(|| "missing 'now'".to_string());
        match kind {
            "hello" => {
                let offered = message.get("versions").and_then(Value::as_array).unwrap_or(&[]);
                let common = VERSIONS.iter().find(|v| offered.iter().any(|o| o.as_i64() == Some(**v)));
                let version = *common.ok_or_else(|| format!("no common protocol version: this port speaks {:?}", VERSIONS))?;
                self.version = version;
                Ok(map(vec![
                    ("type", str_value("hello")),
                    ("version", Value::Int(version)),
                    ("name", str_value(if self.optimized { "tracediff-native --optimized (Rust)" } else { "tracediff-native (Rust)" })),
                    ("capabilities", Value::Array(vec![str_value("bench")])),
                ]))
            }
            "reset" => {
                let scenario = message.get("scenario").ok_or("reset without a scenario")?;
                self.scheduler = Some(self.fresh(scenario)?);
                self.scenario = Some(scenario.clone());
                Ok(ok())
            }
            "arrive" => {
                let request = message.get("request").ok_or("arrive without a request")?;
                self.current()?.arrive(request)?;
                Ok(ok())
            }
            "plan" => {
                let now = now()?;
                let start = Instant::now();
                let record = self.current()?.plan(now)?;
                let took = start.elapsed().as_nanos() as i64;
                Ok(map(vec![("type", str_value("plan")), ("record", record), ("plan_ns", Value::Int(took))]))
            }
            "complete" => {
                let now = now()?;
                let event = message.get("event").ok_or("complete without an event")?;
                let ids = self.current()?.complete(event, now)?;
                Ok(map(vec![("type", str_value("retired")), ("ids", msgpack::int_array(&ids))]))
            }
            "bench" => {
                let now = now()?;
                let scenario = self.scenario.as_ref().ok_or("bench before any reset")?;
                let mut instance = self.fresh(scenario)?;
                instance.load_state(message.get("state").ok_or("bench without a state")?)?;
                let cpu = thread_cpu_ns();
                let start = Instant::now();
                let record = instance.plan(now)?;
                let took = start.elapsed().as_nanos() as i64;
                let cpu = thread_cpu_ns() - cpu;
                Ok(map(vec![
                    ("type", str_value("bench")),
                    ("record", record),
                    ("plan_ns", Value::Int(took)),
                    ("cpu_ns", Value::Int(cpu)),
                ]))
            }
            other => Err(format!("unknown message type {:?}", other)),
        }
    }

    fn fresh(&self, scenario: &Value) -> Result<Scheduler, String> {
        let mut scheduler = Scheduler::new(scenario)?;
        scheduler.set_optimized(self.optimized);
        Ok(scheduler)
    }

    fn current(&mut self) -> Result<&mut Scheduler, String> {
        self.scheduler.as_mut().ok_or_else(|| "a request before any reset".to_string())
    }
}

/// How many plans a `plan` message asks for (version 2's `count`; 1 otherwise).
fn plan_count(message: &Value, version: i64) -> i64 {
    if version < 2 || message.get("type").and_then(Value::as_str) != Some("plan") {
        return 1;
    }
    message.get("count").and_then(Value::as_i64).filter(|&n| n >= 1).unwrap_or(1)
}

/// Whether a reply ends a plan count: anything but a plan whose round was chosen.
fn ends_count(reply: &Value) -> bool {
    reply.get("type").and_then(Value::as_str) != Some("plan")
        || matches!(reply.get("record").and_then(|r| r.get("round")), None | Some(Value::Nil))
}

const USAGE: &str = "usage: tracediff-native [--optimized]\n\
    Speaks tracediff's stdio protocol on stdin/stdout (docs/protocol.md).\n\
    --optimized  the optimized scheduler (docs/optimized.md) instead of the reference";

fn main() {
    let mut optimized = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--optimized" => optimized = true,
            "-h" | "--help" => {
                println!("{}", USAGE);
                return;
            }
            other => {
                eprintln!("tracediff-native: unknown argument {:?}\n{}", other, USAGE);
                std::process::exit(2);
            }
        }
    }
    let stdin = io::stdin();
    let stdout = io::stdout();
    let mut input = io::BufReader::with_capacity(1 << 16, stdin.lock());
    let mut output = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut session = Session { scenario: None, scheduler: None, version: 1, optimized };
    loop {
        let message = match read_message(&mut input) {
            Ok(Some(message)) => message,
            Ok(None) => return,
            Err(text) => {
                eprintln!("tracediff-native: {}", text);
                std::process::exit(2);
            }
        };
        if message.get("type").and_then(Value::as_str) == Some("shutdown") {
            return;
        }
        for _ in 0..plan_count(&message, session.version) {
            let reply = match session.handle(&message) {
                Ok(reply) => reply,
                Err(text) => {
                    // The scheduler's state is unknown after a failed request: the next
                    // scenario starts with a reset.
                    session.scheduler = None;
                    error(text)
                }
            };
            if write_message(&mut output, &reply).is_err() {
                return;
            }
            if ends_count(&reply) {
                break;
            }
        }
        // Flushed once the requests written at once are all answered: one wake-up of the
        // harness per step. The harness never waits for a reply it has not asked for.
        if input.buffer().is_empty() && output.flush().is_err() {
            return;
        }
    }
}
