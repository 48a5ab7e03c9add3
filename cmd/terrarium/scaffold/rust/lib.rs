//! adder-rust is a Terrarium plugin in Rust, written from abi/ABI.md alone, with no
//! crates: one tool, add, that adds two integers. The Extism kernel is its only import.
//! Build it with Debian's rustc and its wasm32 standard library
//! (apt-get install rustc libstd-rust-dev-wasm32):
//!
//!     rustc --edition 2021 --target wasm32-unknown-unknown --crate-type cdylib -O -C strip=symbols -o plugin.wasm lib.rs

#[link(wasm_import_module = "extism:host/env")]
extern "C" {
    fn input_length() -> u64;
    fn input_load_u8(offset: u64) -> u32;
    fn alloc(length: u64) -> u64;
    fn store_u8(offset: u64, value: u32);
    fn output_set(offset: u64, length: u64);
    fn error_set(offset: u64);
}

/// block copies bytes into a new kernel block.
fn block(b: &[u8]) -> u64 {
    unsafe {
        let off = alloc(b.len() as u64);
        for (i, c) in b.iter().enumerate() {
            store_u8(off + i as u64, *c as u32);
        }
        off
    }
}

fn output(b: &[u8]) -> i32 {
    unsafe { output_set(block(b), b.len() as u64) };
    0
}

/// fail sets a protocol error; message must need no JSON escaping.
fn fail(code: &str, message: &str) -> i32 {
    let e = format!(r#"{{"code":"{}","message":"{}"}}"#, code, message);
    unsafe { error_set(block(e.as_bytes())) };
    1
}

fn input() -> Vec<u8> {
    unsafe { (0..input_length()).map(|i| input_load_u8(i) as u8).collect() }
}

const LIMIT: i64 = 1_000_000_000;

const DESCRIPTOR: &str = r#"{"abi":1,"name":"adder-rust","version":"1.0.0",
"description":"Adds integers (a plugin in Rust).",
"tools":[{"name":"add","description":"Adds two integers.",
"inputSchema":{"type":"object","additionalProperties":false,"required":["a","b"],
"properties":{"a":{"type":"integer","minimum":-1000000000,"maximum":1000000000},
"b":{"type":"integer","minimum":-1000000000,"maximum":1000000000}}},
"outputSchema":{"type":"object","additionalProperties":false,"required":["sum"],
"properties":{"sum":{"type":"integer"}}}}]}"#;

/// A JSON value, as far as the plugin needs to know it.
enum Value {
    Str(String),
    Int(i64),
    Object(Vec<(String, Value)>),
    Other,
}

/// A recursive-descent JSON reader; None means the text is not JSON.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn ws(&mut self) {
        while self.pos < self.b.len() && matches!(self.b[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        if self.peek()? != c {
            return None;
        }
        self.pos += 1;
        Some(())
    }

    fn lit(&mut self, s: &str) -> Option<Value> {
        if !self.b[self.pos..].starts_with(s.as_bytes()) {
            return None;
        }
        self.pos += s.len();
        Some(Value::Other)
    }

    /// string keeps escapes as they are: the names compared carry none.
    fn string(&mut self) -> Option<String> {
        self.eat(b'"')?;
        let start = self.pos;
        loop {
            match self.peek()? {
                b'"' => break,
                b'\\' => self.pos += 2,
                c if c < 0x20 => return None,
                _ => self.pos += 1,
            }
        }
        let s = String::from_utf8(self.b.get(start..self.pos)?.to_vec()).ok()?;
        self.pos += 1;
        Some(s)
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if !(c.is_ascii_digit() || matches!(c, b'-' | b'+' | b'.' | b'e' | b'E')) {
                break;
            }
            self.pos += 1;
        }
        let text = std::str::from_utf8(&self.b[start..self.pos]).ok()?;
        if let Ok(n) = text.parse::<i64>() {
            return Some(Value::Int(n));
        }
        text.parse::<f64>().ok().map(|_| Value::Other)
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > 64 {
            return None;
        }
        self.ws();
        match self.peek()? {
            b'{' => {
                self.pos += 1;
                let mut members = Vec::new();
                self.ws();
                if self.peek()? == b'}' {
                    self.pos += 1;
                    return Some(Value::Object(members));
                }
                loop {
                    self.ws();
                    let k = self.string()?;
                    self.eat(b':')?;
                    members.push((k, self.value(depth + 1)?));
                    self.ws();
                    match self.peek()? {
                        b',' => self.pos += 1,
                        b'}' => {
                            self.pos += 1;
                            return Some(Value::Object(members));
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.pos += 1;
                self.ws();
                if self.peek()? == b']' {
                    self.pos += 1;
                    return Some(Value::Other);
                }
                loop {
                    self.value(depth + 1)?;
                    self.ws();
                    match self.peek()? {
                        b',' => self.pos += 1,
                        b']' => {
                            self.pos += 1;
                            return Some(Value::Other);
                        }
                        _ => return None,
                    }
                }
            }
            b'"' => self.string().map(Value::Str),
            b't' => self.lit("true"),
            b'f' => self.lit("false"),
            b'n' => self.lit("null"),
            _ => self.number(),
        }
    }
}

fn get<'v>(members: &'v [(String, Value)], key: &str) -> Option<&'v Value> {
    members.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

#[no_mangle]
pub extern "C" fn terrarium_describe() -> i32 {
    output(DESCRIPTOR.as_bytes())
}

#[no_mangle]
pub extern "C" fn terrarium_call_tool() -> i32 {
    let b = input();
    let mut r = Reader { b: &b, pos: 0 };
    let envelope = match r.value(0) {
        Some(Value::Object(m)) => m,
        _ => return fail("invalid_input", "the input is not a JSON object"),
    };
    r.ws();
    if r.pos != b.len() {
        return fail("invalid_input", "text after the JSON object");
    }
    match get(&envelope, "tool") {
        Some(Value::Str(t)) if t == "add" => {}
        Some(Value::Str(_)) => return fail("not_found", "no such tool"),
        _ => return fail("invalid_input", "no tool named"),
    }
    let input = match get(&envelope, "input") {
        Some(Value::Object(m)) => m,
        _ => return fail("invalid_input", "input: want an object"),
    };
    if input.iter().any(|(k, _)| k != "a" && k != "b") {
        return fail("invalid_input", "input: only a and b are allowed");
    }
    let int = |key| match get(input, key) {
        Some(Value::Int(n)) if (-LIMIT..=LIMIT).contains(n) => Ok(*n),
        None => Err("input: a and b are required"),
        _ => Err("input: a and b must be integers within 1e9"),
    };
    match (int("a"), int("b")) {
        (Ok(a), Ok(b)) => output(format!(r#"{{"output":{{"sum":{}}}}}"#, a + b).as_bytes()),
        (Err(e), _) | (_, Err(e)) => fail("invalid_input", e),
    }
}
