package main

// The rule's patterns, written as plain code rather than regexps. Each function matches exactly
// what the POSIX ERE beside it matches (the bash twin uses those EREs with =~ under LC_ALL=C);
// patterns_test.go checks every one against Go's regexp on a table and under fuzzing.
//
// Why not regexp: an instance serves one run, so whatever a run reads in the guest's linear
// memory is cold in the CPU's caches, and compiled regexps and encoding/json's reflection
// tables live there. The compiled code is shared by every instance and stays warm. Written as
// code, the rule's part of a run went from about 0.15 ms to a few µs (docs/guests.md, "Measured").

// isSpace is [[:space:]] in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func hasPrefixAt(s string, i int, p string) bool { return len(s)-i >= len(p) && s[i:i+len(p)] == p }

// skipSpaces returns the first index at or after i that is not [[:space:]].
func skipSpaces(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

// wordEnd is [[:space:];&|()<>]: a byte that ends a shell word.
func wordEnd(c byte) bool {
	return isSpace(c) || c == ';' || c == '&' || c == '|' || c == '(' || c == ')' || c == '<' || c == '>'
}

// shellAt reports whether (ba|z|da|k)?sh([[:space:];&|()<>]|$) matches at i.
func shellAt(s string, i int) bool {
	for _, p := range [...]string{"sh", "bash", "zsh", "dash", "ksh"} {
		if hasPrefixAt(s, i, p) && (i+len(p) == len(s) || wordEnd(s[i+len(p)])) {
			return true
		}
	}
	return false
}

// shellWordAt reports whether ([^[:space:];&|()<>]*/)?(ba|z|da|k)?sh([[:space:];&|()<>]|$)
// matches at i: a shell named by itself or by a path (/bin/sh). The path's bytes cannot end a
// word, so the shell's name starts at i or just after one of the word's slashes.
func shellWordAt(s string, i int) bool {
	if shellAt(s, i) {
		return true
	}
	for k := i; k < len(s) && !wordEnd(s[k]); k++ {
		if s[k] == '/' && shellAt(s, k+1) {
			return true
		}
	}
	return false
}

// pipeShell matches
// (curl|wget)[^|;&]*[|][[:space:]]*(sudo[[:space:]]+)?([^[:space:];&|()<>]*/)?(ba|z|da|k)?sh([[:space:];&|()<>]|$).
func pipeShell(s string) bool {
	stop := -1 // the first of |;& at or after the last download's end, or len(s)
	for i := 0; i+4 <= len(s); i++ {
		if !hasPrefixAt(s, i, "curl") && !hasPrefixAt(s, i, "wget") {
			continue
		}
		if stop < i+4 {
			for stop = i + 4; stop < len(s) && s[stop] != '|' && s[stop] != ';' && s[stop] != '&'; stop++ {
			}
		}
		if stop == len(s) || s[stop] != '|' {
			continue
		}
		j := skipSpaces(s, stop+1)
		if shellWordAt(s, j) {
			return true
		}
		if hasPrefixAt(s, j, "sudo") && j+4 < len(s) && isSpace(s[j+4]) && shellWordAt(s, skipSpaces(s, j+4)) {
			return true
		}
	}
	return false
}

// subShell matches (ba|z|da|k)?sh[[:space:]]+(-c[[:space:]]+)?["']?(<[(]|[$][(])[[:space:]]*(curl|wget).
// Unanchored, the optional prefix of sh changes nothing, and every other choice is decided by
// the next byte.
func subShell(s string) bool {
	for i := 0; i+2 <= len(s); i++ {
		if !hasPrefixAt(s, i, "sh") || i+2 == len(s) || !isSpace(s[i+2]) {
			continue
		}
		j := skipSpaces(s, i+2)
		if hasPrefixAt(s, j, "-c") && j+2 < len(s) && isSpace(s[j+2]) {
			j = skipSpaces(s, j+2)
		}
		if j < len(s) && (s[j] == '"' || s[j] == '\'') {
			j++
		}
		if !hasPrefixAt(s, j, "<(") && !hasPrefixAt(s, j, "$(") {
			continue
		}
		j = skipSpaces(s, j+2)
		if hasPrefixAt(s, j, "curl") || hasPrefixAt(s, j, "wget") {
			return true
		}
	}
	return false
}

// forkBomb matches :[(][)][[:space:]]*[{][[:space:]]*:[[:space:]]*[|][[:space:]]*:.
func forkBomb(s string) bool {
	for i := 0; i < len(s); i++ {
		if !hasPrefixAt(s, i, ":()") {
			continue
		}
		j := i + 3
		for _, c := range [...]byte{'{', ':', '|', ':'} {
			j = skipSpaces(s, j)
			if j == len(s) || s[j] != c {
				j = -1
				break
			}
			j++
		}
		if j >= 0 {
			return true
		}
	}
	return false
}

// diskRedirect matches >[[:space:]]*/dev/(sd|nvme|hd|vd|xvd|disk|mmcblk).
func diskRedirect(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '>' {
			continue
		}
		j := skipSpaces(s, i+1)
		if !hasPrefixAt(s, j, "/dev/") {
			continue
		}
		j += len("/dev/")
		for _, d := range [...]string{"sd", "nvme", "hd", "vd", "xvd", "disk", "mmcblk"} {
			if hasPrefixAt(s, j, d) {
				return true
			}
		}
	}
	return false
}

// envAssign matches ^[A-Za-z_][A-Za-z0-9_]*=.
func envAssign(w string) bool {
	if w == "" || !(isLetter(w[0]) || w[0] == '_') {
		return false
	}
	i := 1
	for i < len(w) && (isLetter(w[i]) || isDigit(w[i]) || w[i] == '_') {
		i++
	}
	return i < len(w) && w[i] == '='
}

// shortFlag matches ^-[a-zA-Z]*[c] for c 'f', and ^-[a-zA-Z]*[rR] for c 'r' with upper: one of
// the letters right after the dash is c.
func shortFlag(w string, c byte, upper bool) bool {
	if w == "" || w[0] != '-' {
		return false
	}
	for i := 1; i < len(w) && isLetter(w[i]); i++ {
		if w[i] == c || upper && w[i] == c-'a'+'A' {
			return true
		}
	}
	return false
}

func shortR(w string) bool { return shortFlag(w, 'r', true) }
func shortF(w string) bool { return shortFlag(w, 'f', false) }

// shellC matches ^-[a-zA-Z]*c$.
func shellC(w string) bool {
	if len(w) < 2 || w[0] != '-' || w[len(w)-1] != 'c' {
		return false
	}
	for i := 1; i < len(w); i++ {
		if !isLetter(w[i]) {
			return false
		}
	}
	return true
}
