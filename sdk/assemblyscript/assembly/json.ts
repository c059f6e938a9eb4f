// A small JSON writer and reader, for the helper requests and answers and the gate output:
// AssemblyScript has no reflection, and the SDK has no dependency.

import { decode } from "./utf8";

const HEX = "0123456789abcdef";

// Writer builds UTF-8 JSON text in a growing byte buffer.
export class Writer {
  buf: Uint8Array = new Uint8Array(64);
  len: i32 = 0;

  private grow(n: i32): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length << 1;
    while (size < this.len + n) size <<= 1;
    const b = new Uint8Array(size);
    memory.copy(b.dataStart, this.buf.dataStart, <usize>this.len);
    this.buf = b;
  }

  byte(c: u32): Writer {
    this.grow(1);
    store<u8>(this.buf.dataStart + <usize>this.len, <u8>c);
    this.len++;
    return this;
  }

  // raw appends s, which is ASCII JSON syntax (punctuation, a number, a literal).
  raw(s: string): Writer {
    this.grow(s.length);
    for (let i = 0; i < s.length; i++) store<u8>(this.buf.dataStart + <usize>(this.len + i), <u8>s.charCodeAt(i));
    this.len += s.length;
    return this;
  }

  // str appends s quoted as Go's encoding/json writes it: ", \ and control characters escaped
  // (\b \f \n \r \t, else \u00XX), <, > and & as \u003c, \u003e, \u0026, U+2028 and U+2029
  // escaped, an unpaired surrogate as \ufffd.
  str(s: string): Writer {
    this.grow(s.length + 2);
    this.byte(0x22);
    const n = s.length;
    for (let i = 0; i < n; i++) {
      let c = <u32>s.charCodeAt(i);
      if (c < 0x80) {
        if (c >= 0x20 && c != 0x22 && c != 0x5c && c != 0x3c && c != 0x3e && c != 0x26) {
          this.byte(c);
          continue;
        }
        this.byte(0x5c);
        if (c == 0x22 || c == 0x5c) this.byte(c);
        else if (c == 0x08) this.byte(0x62);
        else if (c == 0x0c) this.byte(0x66);
        else if (c == 0x0a) this.byte(0x6e);
        else if (c == 0x0d) this.byte(0x72);
        else if (c == 0x09) this.byte(0x74);
        else this.byte(0x75).byte(0x30).byte(0x30).byte(HEX.charCodeAt(c >> 4)).byte(HEX.charCodeAt(c & 0xf));
        continue;
      }
      if (c == 0x2028 || c == 0x2029) {
        this.raw(c == 0x2028 ? "\\u2028" : "\\u2029");
        continue;
      }
      if (c >= 0xd800 && c <= 0xdfff) {
        const d = i + 1 < n ? <u32>s.charCodeAt(i + 1) : 0;
        if (c < 0xdc00 && d >= 0xdc00 && d <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
          i++;
        } else {
          this.raw("\\ufffd");
          continue;
        }
      }
      this.utf8(c);
    }
    this.byte(0x22);
    return this;
  }

  private utf8(c: u32): void {
    if (c < 0x800) {
      this.byte(0xc0 | (c >> 6)).byte(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
      this.byte(0xe0 | (c >> 12)).byte(0x80 | ((c >> 6) & 0x3f)).byte(0x80 | (c & 0x3f));
    } else {
      this.byte(0xf0 | (c >> 18)).byte(0x80 | ((c >> 12) & 0x3f)).byte(0x80 | ((c >> 6) & 0x3f)).byte(0x80 | (c & 0x3f));
    }
  }

  // field appends "key": (with a comma before every field but the first of an object, which
  // the caller marks with first).
  field(key: string, first: bool): Writer {
    if (!first) this.byte(0x2c);
    return this.str(key).byte(0x3a);
  }

  // bytes returns the text written so far.
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.len);
  }

  toString(): string {
    return decode(this.buf.dataStart, this.len);
  }
}

export const NULL = 0;
export const BOOL = 1;
export const NUMBER = 2;
export const STRING = 3;
export const ARRAY = 4;
export const OBJECT = 5;

// Value is a parsed JSON value. Numbers keep their text (raw), so that a number is written
// back exactly as the host wrote it.
export class Value {
  kind: i32 = NULL;
  bool: bool = false;
  num: f64 = 0;
  raw: string = "";
  str: string = "";
  // items are an array's elements or an object's values; keys are an object's keys.
  items: Array<Value> = [];
  keys: Array<string> = [];

  // get returns the object member key (the last one when repeated, as Go and jq), or null.
  get(key: string): Value | null {
    if (this.kind != OBJECT) return null;
    for (let i = this.keys.length - 1; i >= 0; i--) {
      if (this.keys[i] == key) return this.items[i];
    }
    return null;
  }

  // getString is the string member key, or "" when it is missing or not a string.
  getString(key: string): string {
    const v = this.get(key);
    if (v == null || v.kind != STRING) return "";
    return v.str;
  }

  // getNumber is the number member key, or NaN when it is missing or not a number.
  getNumber(key: string): f64 {
    const v = this.get(key);
    if (v == null || v.kind != NUMBER) return NaN;
    return v.num;
  }
}

// MAX_DEPTH bounds nesting, so that a deep document cannot exhaust the stack.
const MAX_DEPTH = 1000;

// Reader parses RFC 8259 JSON from n bytes at p.
class Reader {
  p: usize;
  n: i32;
  i: i32 = 0;
  failed: bool = false;

  constructor(p: usize, n: i32) {
    this.p = p;
    this.n = n;
  }

  peek(): u32 {
    return this.i < this.n ? <u32>load<u8>(this.p + <usize>this.i) : 0;
  }

  ws(): void {
    while (this.i < this.n) {
      const c = this.peek();
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.i++;
    }
  }

  eat(c: u32): bool {
    if (this.i < this.n && this.peek() == c) {
      this.i++;
      return true;
    }
    return false;
  }

  literal(s: string): bool {
    if (this.n - this.i < s.length) return false;
    for (let k = 0; k < s.length; k++) {
      if (<u32>load<u8>(this.p + <usize>(this.i + k)) != <u32>s.charCodeAt(k)) return false;
    }
    this.i += s.length;
    return true;
  }

  value(depth: i32): Value {
    const v = new Value();
    this.ws();
    const c = this.peek();
    if ((c == 0x7b || c == 0x5b) && depth >= MAX_DEPTH) {
      this.failed = true;
    } else if (c == 0x7b) {
      v.kind = OBJECT;
      this.i++;
      this.ws();
      if (!this.eat(0x7d)) {
        while (!this.failed) {
          this.ws();
          if (this.peek() != 0x22) {
            this.failed = true;
            break;
          }
          const key = this.string();
          this.ws();
          if (!this.eat(0x3a)) {
            this.failed = true;
            break;
          }
          v.keys.push(key);
          v.items.push(this.value(depth + 1));
          this.ws();
          if (this.eat(0x2c)) continue;
          if (!this.eat(0x7d)) this.failed = true;
          break;
        }
      }
    } else if (c == 0x5b) {
      v.kind = ARRAY;
      this.i++;
      this.ws();
      if (!this.eat(0x5d)) {
        while (!this.failed) {
          v.items.push(this.value(depth + 1));
          this.ws();
          if (this.eat(0x2c)) continue;
          if (!this.eat(0x5d)) this.failed = true;
          break;
        }
      }
    } else if (c == 0x22) {
      v.kind = STRING;
      v.str = this.string();
    } else if (c == 0x2d || (c >= 0x30 && c <= 0x39)) {
      v.kind = NUMBER;
      const start = this.i;
      this.number();
      v.raw = decode(this.p + <usize>start, this.i - start);
      v.num = parseFloat(v.raw);
    } else if (this.literal("true")) {
      v.kind = BOOL;
      v.bool = true;
    } else if (this.literal("false")) {
      v.kind = BOOL;
    } else if (!this.literal("null")) {
      this.failed = true;
    }
    return v;
  }

  digits(): bool {
    const start = this.i;
    while (this.i < this.n && this.peek() >= 0x30 && this.peek() <= 0x39) this.i++;
    return this.i > start;
  }

  // number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  number(): void {
    this.eat(0x2d);
    if (!this.eat(0x30)) {
      const c = this.peek();
      if (c < 0x31 || c > 0x39) {
        this.failed = true;
        return;
      }
      this.digits();
    }
    if (this.eat(0x2e) && !this.digits()) {
      this.failed = true;
      return;
    }
    if (this.eat(0x65) || this.eat(0x45)) {
      if (!this.eat(0x2b)) this.eat(0x2d);
      if (!this.digits()) this.failed = true;
    }
  }

  hex4(): i32 {
    if (this.n - this.i < 4) return -1;
    let v = 0;
    for (let k = 0; k < 4; k++) {
      const c = <i32>load<u8>(this.p + <usize>(this.i + k));
      let d = -1;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66) d = (c | 0x20) - 0x61 + 10;
      if (d < 0) return -1;
      v = (v << 4) | d;
    }
    this.i += 4;
    return v;
  }

  // string reads a string (at its opening quote) and returns its value, decoded as Go's
  // encoding/json does: invalid UTF-8 and unpaired surrogate escapes become U+FFFD.
  string(): string {
    this.i++; // the quote
    const start = this.i;
    // The common case: no escape.
    while (this.i < this.n) {
      const c = this.peek();
      if (c == 0x22) {
        const s = decode(this.p + <usize>start, this.i - start);
        this.i++;
        return s;
      }
      if (c == 0x5c || c < 0x20) break;
      this.i++;
    }
    this.i = start;
    const parts = new Array<string>();
    let run = this.i;
    while (this.i < this.n) {
      const c = this.peek();
      if (c == 0x22) {
        parts.push(decode(this.p + <usize>run, this.i - run));
        this.i++;
        return parts.join("");
      }
      if (c < 0x20) break;
      if (c != 0x5c) {
        this.i++;
        continue;
      }
      parts.push(decode(this.p + <usize>run, this.i - run));
      if (this.i + 1 >= this.n) break;
      const e = <u32>load<u8>(this.p + <usize>(this.i + 1));
      this.i += 2;
      if (e == 0x22) parts.push("\"");
      else if (e == 0x5c) parts.push("\\");
      else if (e == 0x2f) parts.push("/");
      else if (e == 0x62) parts.push("\b");
      else if (e == 0x66) parts.push("\f");
      else if (e == 0x6e) parts.push("\n");
      else if (e == 0x72) parts.push("\r");
      else if (e == 0x74) parts.push("\t");
      else if (e == 0x75) {
        let c1 = this.hex4();
        if (c1 < 0) break;
        if (c1 >= 0xd800 && c1 < 0xe000) {
          let paired = false;
          if (c1 < 0xdc00 && this.n - this.i >= 6 && load<u8>(this.p + <usize>this.i) == 0x5c && load<u8>(this.p + <usize>(this.i + 1)) == 0x75) {
            const save = this.i;
            this.i += 2;
            const c2 = this.hex4();
            if (c2 >= 0xdc00 && c2 < 0xe000) {
              parts.push(String.fromCharCode(c1, c2));
              paired = true;
            } else {
              this.i = save;
            }
          }
          if (!paired) parts.push("\ufffd");
        } else {
          parts.push(String.fromCharCode(c1));
        }
      } else break;
      run = this.i;
    }
    this.failed = true;
    return "";
  }
}

// parse parses the whole of b as one JSON value (surrounding whitespace allowed), or returns
// null.
export function parse(b: Uint8Array): Value | null {
  return parseAt(b.dataStart, b.length);
}

// parseAt is parse of n bytes at p.
export function parseAt(p: usize, n: i32): Value | null {
  const r = new Reader(p, n);
  const v = r.value(0);
  r.ws();
  if (r.failed || r.i != r.n) return null;
  return v;
}
