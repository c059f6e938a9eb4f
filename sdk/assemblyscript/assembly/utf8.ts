// UTF-8, the encoding of everything that crosses the boundary, to and from AssemblyScript's
// UTF-16 strings, with Go's rules: an invalid byte decodes to U+FFFD (one per byte, as Go's
// utf8.DecodeRune), and an unpaired surrogate encodes as U+FFFD. A guest in either language
// therefore sees the same text.

// decode returns the n bytes at p as a string.
export function decode(p: usize, n: i32): string {
  if (n == 0) return "";
  const out = new Array<u16>(0);
  // Fast path: ASCII only.
  let ascii = true;
  for (let i = 0; i < n; i++) {
    if (load<u8>(p + <usize>i) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return String.UTF8.decodeUnsafe(p, <usize>n);
  let i = 0;
  while (i < n) {
    const c0 = <u32>load<u8>(p + <usize>i);
    if (c0 < 0x80) {
      out.push(<u16>c0);
      i++;
      continue;
    }
    let size = 0;
    let lo: u32 = 0x80;
    let hi: u32 = 0xbf;
    let r: u32 = 0;
    if (c0 >= 0xc2 && c0 <= 0xdf) {
      size = 2;
      r = c0 & 0x1f;
    } else if (c0 >= 0xe0 && c0 <= 0xef) {
      size = 3;
      r = c0 & 0x0f;
      if (c0 == 0xe0) lo = 0xa0;
      else if (c0 == 0xed) hi = 0x9f;
    } else if (c0 >= 0xf0 && c0 <= 0xf4) {
      size = 4;
      r = c0 & 0x07;
      if (c0 == 0xf0) lo = 0x90;
      else if (c0 == 0xf4) hi = 0x8f;
    }
    let ok = size > 0 && i + size <= n;
    for (let k = 1; ok && k < size; k++) {
      const c = <u32>load<u8>(p + <usize>(i + k));
      if (k == 1 ? c < lo || c > hi : c < 0x80 || c > 0xbf) ok = false;
      else r = (r << 6) | (c & 0x3f);
    }
    if (!ok) {
      out.push(0xfffd);
      i++;
      continue;
    }
    if (r >= 0x10000) {
      r -= 0x10000;
      out.push(<u16>(0xd800 | (r >> 10)));
      out.push(<u16>(0xdc00 | (r & 0x3ff)));
    } else {
      out.push(<u16>r);
    }
    i += size;
  }
  return String.UTF16.decodeUnsafe(out.dataStart, <usize>out.length << 1);
}

// decodeBytes returns b as a string.
export function decodeBytes(b: Uint8Array): string {
  return decode(b.dataStart, b.length);
}

// encode returns s as UTF-8.
export function encode(s: string): Uint8Array {
  return Uint8Array.wrap(String.UTF8.encode(s, false, String.UTF8.ErrorMode.REPLACE));
}
