// Byte-string helpers: the rule works on the UTF-8 bytes of the command, as the Go guest works
// on Go strings and its bash twin under LC_ALL=C, so that all three see the same characters.

// Bytes is a growing byte buffer.
export class Bytes {
  buf: Uint8Array = new Uint8Array(32);
  len: i32 = 0;

  push(c: u8): void {
    if (this.len == this.buf.length) {
      const b = new Uint8Array(this.buf.length << 1);
      memory.copy(b.dataStart, this.buf.dataStart, <usize>this.len);
      this.buf = b;
    }
    unchecked((this.buf[this.len] = c));
    this.len++;
  }

  // rune appends r in UTF-8 (r is a valid scalar value or U+FFFD).
  rune(r: u32): void {
    if (r < 0x80) {
      this.push(<u8>r);
    } else if (r < 0x800) {
      this.push(<u8>(0xc0 | (r >> 6)));
      this.push(<u8>(0x80 | (r & 0x3f)));
    } else if (r < 0x10000) {
      this.push(<u8>(0xe0 | (r >> 12)));
      this.push(<u8>(0x80 | ((r >> 6) & 0x3f)));
      this.push(<u8>(0x80 | (r & 0x3f)));
    } else {
      this.push(<u8>(0xf0 | (r >> 18)));
      this.push(<u8>(0x80 | ((r >> 12) & 0x3f)));
      this.push(<u8>(0x80 | ((r >> 6) & 0x3f)));
      this.push(<u8>(0x80 | (r & 0x3f)));
    }
  }

  bytes(): Uint8Array {
    return this.buf.subarray(0, this.len);
  }
}

// @inline
export function at(s: Uint8Array, i: i32): u32 {
  return <u32>unchecked(s[i]);
}

// eq reports whether s is the ASCII literal lit.
export function eq(s: Uint8Array, lit: string): bool {
  if (s.length != lit.length) return false;
  for (let i = 0; i < s.length; i++) if (at(s, i) != <u32>lit.charCodeAt(i)) return false;
  return true;
}

// hasPrefixAt reports whether lit is at s[i:].
export function hasPrefixAt(s: Uint8Array, i: i32, lit: string): bool {
  if (s.length - i < lit.length) return false;
  for (let k = 0; k < lit.length; k++) if (at(s, i + k) != <u32>lit.charCodeAt(k)) return false;
  return true;
}

export function hasPrefix(s: Uint8Array, lit: string): bool {
  return hasPrefixAt(s, 0, lit);
}

// decodeRune decodes the UTF-8 sequence at s[i:] as Go's utf8.DecodeRune: it returns the rune
// and its size in the low and high halves of the result; an invalid byte is U+FFFD of size 1.
export function decodeRune(s: Uint8Array, i: i32): u64 {
  const n = s.length;
  const c0 = at(s, i);
  if (c0 < 0x80) return <u64>c0 | (<u64>1 << 32);
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
  if (size == 0 || i + size > n) return <u64>0xfffd | (<u64>1 << 32);
  for (let k = 1; k < size; k++) {
    const c = at(s, i + k);
    if (k == 1 ? c < lo || c > hi : c < 0x80 || c > 0xbf) return <u64>0xfffd | (<u64>1 << 32);
    r = (r << 6) | (c & 0x3f);
  }
  return <u64>r | (<u64>size << 32);
}

// isUnicodeSpace is Go's unicode.IsSpace.
function isUnicodeSpace(r: u32): bool {
  if (r <= 0xff) return r == 0x20 || (r >= 0x09 && r <= 0x0d) || r == 0x85 || r == 0xa0;
  return r == 0x1680 || (r >= 0x2000 && r <= 0x200a) || r == 0x2028 || r == 0x2029 || r == 0x202f || r == 0x205f || r == 0x3000;
}

// blank reports whether s is empty after Go's strings.TrimSpace.
export function blank(s: Uint8Array): bool {
  let i = 0;
  while (i < s.length) {
    const d = decodeRune(s, i);
    if (!isUnicodeSpace(<u32>d)) return false;
    i += <i32>(d >> 32);
  }
  return true;
}
