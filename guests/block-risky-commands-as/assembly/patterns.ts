// The rule's patterns, as plain code: each function matches exactly what the POSIX ERE beside
// it matches (the bash twin uses those EREs with =~ under LC_ALL=C), as the Go guest's
// patterns.go does, function for function.

import { at, hasPrefixAt } from "./bytes";

// isSpace is [[:space:]] in the C locale.
export function isSpace(c: u32): bool {
  return c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0b || c == 0x0c || c == 0x0d;
}

export function isLetter(c: u32): bool {
  return (c | 0x20) >= 0x61 && (c | 0x20) <= 0x7a;
}

export function isDigit(c: u32): bool {
  return c >= 0x30 && c <= 0x39;
}

// skipSpaces returns the first index at or after i that is not [[:space:]].
function skipSpaces(s: Uint8Array, i: i32): i32 {
  while (i < s.length && isSpace(at(s, i))) i++;
  return i;
}

const SHELLS = ["sh", "bash", "zsh", "dash", "ksh"];

// wordEnd is [[:space:];&|()<>]: a byte that ends a shell word.
function wordEnd(c: u32): bool {
  return isSpace(c) || c == 0x3b || c == 0x26 || c == 0x7c || c == 0x28 || c == 0x29 || c == 0x3c || c == 0x3e;
}

// shellAt reports whether (ba|z|da|k)?sh([[:space:];&|()<>]|$) matches at i.
function shellAt(s: Uint8Array, i: i32): bool {
  for (let k = 0; k < SHELLS.length; k++) {
    const p = unchecked(SHELLS[k]);
    if (hasPrefixAt(s, i, p) && (i + p.length == s.length || wordEnd(at(s, i + p.length)))) return true;
  }
  return false;
}

// shellWordAt reports whether ([^[:space:];&|()<>]*/)?(ba|z|da|k)?sh([[:space:];&|()<>]|$)
// matches at i: a shell named by itself or by a path (/bin/sh), as the Go guest's shellWordAt.
function shellWordAt(s: Uint8Array, i: i32): bool {
  if (shellAt(s, i)) return true;
  for (let k = i; k < s.length && !wordEnd(at(s, k)); k++) {
    if (at(s, k) == 0x2f && shellAt(s, k + 1)) return true;
  }
  return false;
}

function download(s: Uint8Array, i: i32): bool {
  return hasPrefixAt(s, i, "curl") || hasPrefixAt(s, i, "wget");
}

// pipeShell matches
// (curl|wget)[^|;&]*[|][[:space:]]*(sudo[[:space:]]+)?([^[:space:];&|()<>]*/)?(ba|z|da|k)?sh([[:space:];&|()<>]|$).
export function pipeShell(s: Uint8Array): bool {
  const n = s.length;
  let stop = -1; // the first of |;& at or after the last download's end, or n
  for (let i = 0; i + 4 <= n; i++) {
    if (!download(s, i)) continue;
    if (stop < i + 4) {
      for (stop = i + 4; stop < n; stop++) {
        const c = at(s, stop);
        if (c == 0x7c || c == 0x3b || c == 0x26) break;
      }
    }
    if (stop == n || at(s, stop) != 0x7c) continue;
    const j = skipSpaces(s, stop + 1);
    if (shellWordAt(s, j)) return true;
    if (hasPrefixAt(s, j, "sudo") && j + 4 < n && isSpace(at(s, j + 4)) && shellWordAt(s, skipSpaces(s, j + 4))) return true;
  }
  return false;
}

// subShell matches (ba|z|da|k)?sh[[:space:]]+(-c[[:space:]]+)?["']?(<[(]|[$][(])[[:space:]]*(curl|wget).
export function subShell(s: Uint8Array): bool {
  const n = s.length;
  for (let i = 0; i + 2 <= n; i++) {
    if (!hasPrefixAt(s, i, "sh") || i + 2 == n || !isSpace(at(s, i + 2))) continue;
    let j = skipSpaces(s, i + 2);
    if (hasPrefixAt(s, j, "-c") && j + 2 < n && isSpace(at(s, j + 2))) j = skipSpaces(s, j + 2);
    if (j < n && (at(s, j) == 0x22 || at(s, j) == 0x27)) j++;
    if (!hasPrefixAt(s, j, "<(") && !hasPrefixAt(s, j, "$(")) continue;
    j = skipSpaces(s, j + 2);
    if (download(s, j)) return true;
  }
  return false;
}

// forkBomb matches :[(][)][[:space:]]*[{][[:space:]]*:[[:space:]]*[|][[:space:]]*:.
export function forkBomb(s: Uint8Array): bool {
  const n = s.length;
  for (let i = 0; i < n; i++) {
    if (!hasPrefixAt(s, i, ":()")) continue;
    let j = i + 3;
    const want = "{:|:";
    for (let k = 0; k < want.length; k++) {
      j = skipSpaces(s, j);
      if (j == n || at(s, j) != <u32>want.charCodeAt(k)) {
        j = -1;
        break;
      }
      j++;
    }
    if (j >= 0) return true;
  }
  return false;
}

const DISKS = ["sd", "nvme", "hd", "vd", "xvd", "disk", "mmcblk"];

// diskRedirect matches >[[:space:]]*/dev/(sd|nvme|hd|vd|xvd|disk|mmcblk).
export function diskRedirect(s: Uint8Array): bool {
  const n = s.length;
  for (let i = 0; i < n; i++) {
    if (at(s, i) != 0x3e) continue;
    let j = skipSpaces(s, i + 1);
    if (!hasPrefixAt(s, j, "/dev/")) continue;
    j += 5;
    for (let k = 0; k < DISKS.length; k++) if (hasPrefixAt(s, j, unchecked(DISKS[k]))) return true;
  }
  return false;
}

// envAssign matches ^[A-Za-z_][A-Za-z0-9_]*=.
export function envAssign(w: Uint8Array): bool {
  if (w.length == 0 || !(isLetter(at(w, 0)) || at(w, 0) == 0x5f)) return false;
  let i = 1;
  while (i < w.length && (isLetter(at(w, i)) || isDigit(at(w, i)) || at(w, i) == 0x5f)) i++;
  return i < w.length && at(w, i) == 0x3d;
}

// shortFlag matches ^-[a-zA-Z]*[c] for c 'f', and ^-[a-zA-Z]*[rR] for c 'r' with upper: one of
// the letters right after the dash is c.
function shortFlag(w: Uint8Array, c: u32, upper: bool): bool {
  if (w.length == 0 || at(w, 0) != 0x2d) return false;
  for (let i = 1; i < w.length && isLetter(at(w, i)); i++) {
    if (at(w, i) == c || (upper && at(w, i) == c - 0x20)) return true;
  }
  return false;
}

export function shortR(w: Uint8Array): bool {
  return shortFlag(w, 0x72, true);
}

export function shortF(w: Uint8Array): bool {
  return shortFlag(w, 0x66, false);
}

// shellC matches ^-[a-zA-Z]*c$.
export function shellC(w: Uint8Array): bool {
  if (w.length < 2 || at(w, 0) != 0x2d || at(w, w.length - 1) != 0x63) return false;
  for (let i = 1; i < w.length; i++) if (!isLetter(at(w, i))) return false;
  return true;
}
