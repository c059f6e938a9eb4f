// The command in the tool arguments JSON, read exactly as the Go guest's args.go reads it (and
// so as the bash twin's jq program does): the top-level object's "command", or its "cmd" when
// "command" is missing, null or false; a string is the command, an array of strings is joined
// with spaces, anything else (and arguments that are not JSON) is no command. Keys are matched
// exactly and the last of repeated keys wins, as in jq. Containers are tracked on an explicit
// stack, not by recursion, so that nesting up to encoding/json's limit of 10000 reads the same
// as in the Go guest (an AssemblyScript recursion that deep would exhaust the stack).

import { Bytes, at, decodeRune, eq, hasPrefixAt } from "./bytes";

const MAX_DEPTH = 10000;

function isDigit(c: u32): bool {
  return c >= 0x30 && c <= 0x39;
}

class Reader {
  s: Uint8Array;
  i: i32 = 0;
  // stack holds the open containers ('{' or '[') of the value being skipped.
  stack: Bytes = new Bytes();

  constructor(s: Uint8Array) {
    this.s = s;
  }

  ok(): bool {
    return this.i <= this.s.length;
  }
  fail(): void {
    this.i = this.s.length + 1;
  }
  peek(): u32 {
    return this.i < this.s.length ? at(this.s, this.i) : 0;
  }
  eat(c: u32): bool {
    if (this.i < this.s.length && at(this.s, this.i) == c) {
      this.i++;
      return true;
    }
    return false;
  }
  ws(): void {
    while (this.i < this.s.length) {
      const c = at(this.s, this.i);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.i++;
    }
  }

  // member reads `"key" ws : ws` of an object; false on an error (then failed).
  member(key: Bytes | null): bool {
    if (!this.str(key)) {
      this.fail();
      return false;
    }
    this.ws();
    if (!this.eat(0x3a)) {
      this.fail();
      return false;
    }
    this.ws();
    return true;
  }

  // value skips one value at nesting depth (the number of arrays and objects around it).
  value(depth: i32): void {
    const base = this.stack.len;
    for (;;) {
      // A value starts here.
      const c = this.peek();
      if (c == 0x7b || c == 0x5b) {
        if (depth + this.stack.len - base >= MAX_DEPTH) {
          this.fail();
          return;
        }
        this.i++;
        this.ws();
        if (this.eat(c == 0x7b ? 0x7d : 0x5d)) {
          // empty: the value is complete
        } else {
          this.stack.push(<u8>c);
          if (c == 0x7b && !this.member(null)) return;
          continue;
        }
      } else if (c == 0x22) {
        if (!this.str(null)) {
          this.fail();
          return;
        }
      } else if (c == 0x2d || isDigit(c)) {
        this.number();
        if (!this.ok()) return;
      } else if (hasPrefixAt(this.s, this.i, "true")) {
        this.i += 4;
      } else if (hasPrefixAt(this.s, this.i, "false")) {
        this.i += 5;
      } else if (hasPrefixAt(this.s, this.i, "null")) {
        this.i += 4;
      } else {
        this.fail();
        return;
      }
      // A value ended: close containers or go on to the next element.
      for (;;) {
        if (this.stack.len == base) return;
        const top = <u32>unchecked(this.stack.buf[this.stack.len - 1]);
        this.ws();
        if (this.eat(0x2c)) {
          this.ws();
          if (top == 0x7b && !this.member(null)) return;
          break;
        }
        if (!this.eat(top == 0x7b ? 0x7d : 0x5d)) {
          this.fail();
          return;
        }
        this.stack.len--;
      }
    }
  }

  // number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  number(): void {
    this.eat(0x2d);
    if (this.eat(0x30)) {
      // a single zero
    } else if (this.i < this.s.length && at(this.s, this.i) >= 0x31 && at(this.s, this.i) <= 0x39) {
      this.digits();
    } else {
      this.fail();
      return;
    }
    if (this.eat(0x2e) && !this.digits()) {
      this.fail();
      return;
    }
    if (this.eat(0x65) || this.eat(0x45)) {
      if (!this.eat(0x2b)) this.eat(0x2d);
      if (!this.digits()) this.fail();
    }
  }

  digits(): bool {
    const start = this.i;
    while (this.i < this.s.length && isDigit(at(this.s, this.i))) this.i++;
    return this.i > start;
  }

  hex4(): i32 {
    if (this.s.length - this.i < 4) return -1;
    let v = 0;
    for (let k = 0; k < 4; k++) {
      const c = at(this.s, this.i + k);
      if (isDigit(c)) v = (v << 4) | <i32>(c - 0x30);
      else if ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66) v = (v << 4) | <i32>((c | 0x20) - 0x61 + 10);
      else return -1;
    }
    this.i += 4;
    return v;
  }

  // str reads a string; its value goes to out (when not null), decoded as encoding/json does:
  // invalid UTF-8 and unpaired surrogates become U+FFFD. False when it is not a valid string.
  str(out: Bytes | null): bool {
    if (!this.eat(0x22)) return false;
    const s = this.s;
    while (this.i < s.length) {
      const c = at(s, this.i);
      if (c == 0x22) {
        this.i++;
        return true;
      }
      if (c < 0x20) return false;
      if (c == 0x5c) {
        if (this.i + 1 >= s.length) return false;
        const e = at(s, this.i + 1);
        this.i += 2;
        let w: u32 = 0;
        if (e == 0x22 || e == 0x5c || e == 0x2f) w = e;
        else if (e == 0x62) w = 0x08;
        else if (e == 0x66) w = 0x0c;
        else if (e == 0x6e) w = 0x0a;
        else if (e == 0x72) w = 0x0d;
        else if (e == 0x74) w = 0x09;
        else if (e == 0x75) {
          let c1 = this.hex4();
          if (c1 < 0) return false;
          if (c1 >= 0xd800 && c1 < 0xe000) {
            const save = this.i;
            let pair: u32 = 0;
            if (hasPrefixAt(s, this.i, "\\u")) {
              this.i += 2;
              const c2 = this.hex4();
              if (c1 < 0xdc00 && c2 >= 0xdc00 && c2 < 0xe000) pair = 0x10000 + ((<u32>c1 - 0xd800) << 10) + (<u32>c2 - 0xdc00);
            }
            if (pair != 0) {
              if (out != null) out.rune(pair);
              continue;
            }
            this.i = save;
            c1 = 0xfffd;
          }
          w = <u32>c1;
        } else return false;
        if (out != null) out.rune(w);
        continue;
      }
      if (c < 0x80) {
        if (out != null) out.push(<u8>c);
        this.i++;
        continue;
      }
      const d = decodeRune(s, this.i);
      if (out != null) out.rune(<u32>d);
      this.i += <i32>(d >> 32);
    }
    return false;
  }
}

// command returns the shell command in the tool arguments JSON (see the file comment).
export function command(args: Uint8Array): Uint8Array {
  const r = new Reader(args);
  r.ws();
  let cmdFrom = -1, cmdTo = -1, altFrom = -1, altTo = -1;
  if (r.peek() == 0x7b) {
    r.i++;
    r.ws();
    if (!r.eat(0x7d)) {
      const key = new Bytes();
      while (r.ok()) {
        key.len = 0;
        if (!r.member(key)) break;
        const start = r.i;
        r.value(1);
        if (!r.ok()) break;
        const k = key.bytes();
        if (eq(k, "command")) {
          cmdFrom = start;
          cmdTo = r.i;
        } else if (eq(k, "cmd")) {
          altFrom = start;
          altTo = r.i;
        }
        r.ws();
        if (r.eat(0x2c)) {
          r.ws();
          continue;
        }
        if (!r.eat(0x7d)) r.fail();
        break;
      }
    }
  } else {
    r.value(0);
  }
  r.ws();
  if (!r.ok() || r.i != args.length) return new Uint8Array(0);
  let raw = cmdFrom < 0 ? new Uint8Array(0) : args.subarray(cmdFrom, cmdTo);
  if (raw.length == 0 || eq(raw, "null") || eq(raw, "false")) {
    raw = altFrom < 0 ? new Uint8Array(0) : args.subarray(altFrom, altTo);
  }
  return commandValue(raw);
}

// commandValue is a string value's text, or an array of strings joined with spaces; raw is a
// valid JSON value.
function commandValue(raw: Uint8Array): Uint8Array {
  const r = new Reader(raw);
  const out = new Bytes();
  const c = r.peek();
  if (c == 0x22) {
    r.str(out);
    return out.bytes();
  }
  if (c == 0x5b) {
    r.i++;
    r.ws();
    if (r.eat(0x5d)) return new Uint8Array(0);
    let first = true;
    for (;;) {
      if (r.peek() != 0x22) return new Uint8Array(0);
      if (!first) out.push(0x20);
      first = false;
      r.str(out);
      r.ws();
      if (r.eat(0x5d)) return out.bytes();
      r.eat(0x2c);
      r.ws();
    }
  }
  return new Uint8Array(0);
}
