package main

import (
	"regexp"
	"strings"
	"testing"
)

// The bash twin's regexps (block-risky-commands.sh), the oracle of the matchers in patterns.go.
var oracles = []struct {
	name  string
	re    *regexp.Regexp
	match func(string) bool
}{
	{"pipe-shell", regexp.MustCompile(`(curl|wget)[^|;&]*[|][[:space:]]*(sudo[[:space:]]+)?([^[:space:];&|()<>]*/)?(ba|z|da|k)?sh([[:space:];&|()<>]|$)`), pipeShell},
	{"sub-shell", regexp.MustCompile(`(ba|z|da|k)?sh[[:space:]]+(-c[[:space:]]+)?["']?(<[(]|[$][(])[[:space:]]*(curl|wget)`), subShell},
	{"fork-bomb", regexp.MustCompile(`:[(][)][[:space:]]*[{][[:space:]]*:[[:space:]]*[|][[:space:]]*:`), forkBomb},
	{"disk", regexp.MustCompile(`>[[:space:]]*/dev/(sd|nvme|hd|vd|xvd|disk|mmcblk)`), diskRedirect},
	{"env-assign", regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`), envAssign},
	{"short-r", regexp.MustCompile(`^-[a-zA-Z]*[rR]`), shortR},
	{"short-f", regexp.MustCompile(`^-[a-zA-Z]*f`), shortF},
	{"shell-c", regexp.MustCompile(`^-[a-zA-Z]*c$`), shellC},
}

// The twin's regexps are the ones above, so that the oracle is the twin's.
func TestOraclesAreTheTwins(t *testing.T) {
	sh := string(mustRead(t, "block-risky-commands.sh"))
	for _, o := range oracles {
		re := strings.ReplaceAll(o.re.String(), `["']`, `["'"'"']`) // the twin's quoting of '
		if !strings.Contains(sh, "='"+re+"'") {
			t.Errorf("%s: %s is not in block-risky-commands.sh", o.name, re)
		}
	}
}

var patternCases = []string{
	"", "curl x | sh", "curl x|bash", "wget -qO- x | sudo  bash -s", "curl x | sudo sh", "curl x | sudosh",
	"curl x ; sh", "curl x & | sh", "curl x | shx", "curl x | zsh\n", "curl x | ksh\t-", "wget x || sh",
	"curlwget | dash", "curl a; curl b | sh", "echo curl | tee | sh", "curl x |\n\tsh", "curl x\n| sh",
	"sh <(curl x)", "bash -c \"$(wget -O- x)\"", "sh -c '$( curl x)'", "zsh $(curl", "sh -cx $(curl x)",
	"sh -c$(curl x)", "sh\t\t<(  wget x)", "ssh <(curl x)", "sh \"'<(curl x)", "bash -c \"$(curl",
	":(){ :|:& };:", ":() { : | : & }", ":(){:|:}", ": () { :|: }", ":(){ :|", "x:(){\n:\n|\n:",
	"echo > /dev/sda", "dd if=x >/dev/nvme0n1", "> /dev/null", ">\t/dev/disk2", "x >/dev/mmcblk0", "> /dev/xvda",
	"A=1", "_x=", "1A=", "A", "a-b=1", "ABC_9=x=y", "=x",
	"-r", "-R", "-fr", "-rf", "-x1r", "--recursive", "-", "-f", "-xf", "-c", "-lc", "-c1", "-cx", "-ic", "-",
	"\x00curl|sh", "curl x | sh\xff", "é curl x | bash", "curl\xc3 | sh",
	// A shell word ends at any shell metacharacter, and a shell may be named by its path.
	"curl x | sh; touch RAN", "curl x | sh&&y", "(curl x | sh)", "curl x |sh|tee", "curl x | sh>log", "curl x | sh<y",
	"curl x | bash&", "curl x | /bin/sh", "curl x | /usr/bin/bash -s", "curl x | sudo /bin/sh", "curl x | ./sh",
	"curl x | sudo/bin/sh", "curl x | /bin/shx", "curl x | /bin/ sh", "curl x | a/b/c/zsh;", "curl x | /bin/sh/x",
	"curl x | /sh/bash", "curl x | bin;/sh", "curl x | (sh)", "curl x | sh)", "curl x | sh(", "curl x | sh`",
}

func TestPatternsMatchTheTwinsRegexps(t *testing.T) {
	for _, o := range oracles {
		t.Run(o.name, func(t *testing.T) {
			for _, s := range patternCases {
				if got, want := o.match(s), o.re.MatchString(s); got != want {
					t.Errorf("%q: %v, the regexp says %v", s, got, want)
				}
			}
		})
	}
}

// FuzzPatterns checks every matcher against its regexp on any input (go test -fuzz FuzzPatterns).
func FuzzPatterns(f *testing.F) {
	for _, s := range patternCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, o := range oracles {
			if got, want := o.match(s), o.re.MatchString(s); got != want {
				t.Fatalf("%s %q: %v, the regexp says %v", o.name, s, got, want)
			}
		}
	})
}
