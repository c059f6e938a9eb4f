// Moving bytes between the guest's linear memory and Extism's kernel memory. Extism's kernel
// calls cost microseconds each in Pixie's host, except load_u64 and store_u64 (docs/abi.md,
// "Cost"), so blocks are copied 8 bytes at a time, and blocks the SDK writes are padded to a
// multiple of 8 wherever the reader allows it.

import * as env from "./env";

// readAt copies n bytes of the kernel block at off: load_u64 for every whole word, load_u8 for
// the 0-7 bytes left (none when the host padded the block, as Pixie does).
export function readAt(off: u64, n: i32): Uint8Array {
  const b = new Uint8Array(n);
  const p = b.dataStart;
  let i = 0;
  for (; i + 8 <= n; i += 8) store<u64>(p + <usize>i, env.load_u64(off + <u64>i));
  for (; i < n; i++) store<u8>(p + <usize>i, <u8>env.load_u8(off + <u64>i));
  return b;
}

// readBlock copies the kernel block at off, sized by Extism's length (one kernel call).
export function readBlock(off: u64): Uint8Array {
  if (off == 0) return new Uint8Array(0);
  return readAt(off, <i32>env.length(off));
}

// readFree is readBlock followed by free.
export function readFree(off: u64): Uint8Array {
  if (off == 0) return new Uint8Array(0);
  const b = readBlock(off);
  env.free(off);
  return b;
}

// writeExact allocates a block of exactly n bytes and fills it from p: for the kernel calls
// that size their argument by the block's length (error_set, config_get).
export function writeExact(p: usize, n: i32): u64 {
  const off = env.alloc(<u64>n);
  let i = 0;
  for (; i + 8 <= n; i += 8) env.store_u64(off + <u64>i, load<u64>(p + <usize>i));
  for (; i < n; i++) env.store_u8(off + <u64>i, <u32>load<u8>(p + <usize>i));
  return off;
}

// writePadded allocates n rounded up to 8 bytes and fills it from p, the last word completed
// with pad: one kernel call (alloc) and store_u64 alone. Pixie reads JSON requests padded with
// spaces; the output is set to its first n bytes.
export function writePadded(p: usize, n: i32, pad: u8): u64 {
  const full = (n + 7) & ~7;
  const off = env.alloc(<u64>full);
  let i = 0;
  for (; i + 8 <= n; i += 8) env.store_u64(off + <u64>i, load<u64>(p + <usize>i));
  if (i < n) {
    let w: u64 = 0;
    for (let j = 7; j >= 0; j--) {
      const c: u64 = i + j < n ? <u64>load<u8>(p + <usize>(i + j)) : <u64>pad;
      w = (w << 8) | c;
    }
    env.store_u64(off + <u64>i, w);
  }
  return off;
}
