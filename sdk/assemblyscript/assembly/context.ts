// The run's context: the gate target and every variable, fetched in one pixie_context block
// (docs/abi.md, "The context block") on first use, read with load_u64 alone.

import * as env from "./env";
import { readAt } from "./memory";
import { decode } from "./utf8";

const MAGIC: u32 = 0x54435850; // "PXCT", little-endian
const VERSION: u32 = 1;
const HEADER = 12;
const MIN_SIZE = HEADER + 8;

export class Context {
  // target holds the target's bytes, as the host sent them.
  target: Uint8Array = new Uint8Array(0);
  keys: Array<string> = [];
  values: Array<string> = [];
  private targetText: string | null = null;

  targetString(): string {
    let t = this.targetText;
    if (t == null) {
      t = decode(this.target.dataStart, this.target.length);
      this.targetText = t;
    }
    return t;
  }

  // lookup returns the value of key, or null: a handful of variables, searched in order.
  lookup(key: string): string | null {
    for (let i = 0; i < this.keys.length; i++) {
      if (this.keys[i] == key) return this.values[i];
    }
    return null;
  }
}

function u32At(b: Uint8Array, off: i32): u32 {
  return load<u32>(b.dataStart + <usize>off);
}

// fetch calls pixie_context and decodes its block; a malformed block aborts the run (the host
// wrote it: it cannot be malformed unless host and guest disagree on the ABI).
export function fetch(): Context {
  const off = env.pixie_context();
  const head = env.load_u64(off);
  if (<u32>head != MAGIC) throw new Error("sdk: pixie_context: bad magic");
  const size = <u32>(head >> 32);
  if (size < <u32>MIN_SIZE) throw new Error("sdk: pixie_context: the block is too short");
  const padded = <i32>((size + 7) & ~7);
  const b = readAt(off, padded);
  if (u32At(b, 8) != VERSION) throw new Error("sdk: pixie_context: unknown version");
  const ctx = new Context();
  const end = <i32>size;
  let i = HEADER;
  const tlen = <i32>u32At(b, i);
  i += 4;
  if (tlen < 0 || tlen > end - i) throw new Error("sdk: pixie_context: the target runs past the end");
  ctx.target = b.slice(i, i + tlen);
  i += tlen;
  if (end - i < 4) throw new Error("sdk: pixie_context: no variable count");
  const count = <i32>u32At(b, i);
  i += 4;
  for (let k = 0; k < count; k++) {
    if (end - i < 4) throw new Error("sdk: pixie_context: a key runs past the end");
    const kl = <i32>u32At(b, i);
    i += 4;
    if (kl < 0 || kl > end - i) throw new Error("sdk: pixie_context: a key runs past the end");
    ctx.keys.push(decode(b.dataStart + <usize>i, kl));
    i += kl;
    if (end - i < 4) throw new Error("sdk: pixie_context: a value runs past the end");
    const vl = <i32>u32At(b, i);
    i += 4;
    if (vl < 0 || vl > end - i) throw new Error("sdk: pixie_context: a value runs past the end");
    ctx.values.push(decode(b.dataStart + <usize>i, vl));
    i += vl;
  }
  if (i != end) throw new Error("sdk: pixie_context: bytes left over");
  return ctx;
}
