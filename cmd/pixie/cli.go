package main

// The CLI's one subcommand table. Every verb is a *command: a group (`pixie gate`, `pixie pet
// skills`) lists its subcommands, a leaf defines its own flags and runs. A verb's help lists only
// the flags that verb defines; `-h`, `--help` and `pixie help VERB …` print it on stdout and exit
// 0 everywhere; a usage error prints the problem once with the synopsis on stderr and exits 2; a
// failure prints `pixie: <error>` once (with its problems, one per line) and exits 1.
//
// Adding a verb: in the verb's own file,
//
//	func init() {
//		register(&command{name: "doctor", summary: "check the set-up",
//			flags: func(fs *flag.FlagSet) runFunc {
//				verbose := fs.Bool("v", false, "say more")
//				return withClient(fs, func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error {
//					…
//				})
//			}})
//	}
//
// and subcommands go in subs (each a *command of its own).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// cmdIO is what a command reads and writes.
type cmdIO struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// runFunc is a leaf command's body; pos are its positional arguments (flags may come before,
// between or after them).
type runFunc func(ctx context.Context, io cmdIO, pos []string) error

// command is one node of the subcommand table.
type command struct {
	name    string
	args    string // the positional arguments in the synopsis: "NAME", "[TASK]", "FILE.wasm"
	summary string // one line, shown in the parent's list
	help    string // more text for --help, after the synopsis
	hidden  bool
	// nargs are the least and most positional arguments; the zero value means none; a max of
	// -1 means any number.
	nargs [2]int
	// flags defines the leaf's own flags on fs and returns its body. A group has subs instead.
	flags func(fs *flag.FlagSet) runFunc
	// raw is for commands that parse their own arguments (the helper, the sandbox re-exec).
	raw  func(ctx context.Context, io cmdIO, args []string) int
	subs []*command
	// usageCode is the exit code of a usage error (default 2; the hook adapter uses 1, a
	// non-blocking error for the agent host).
	usageCode int
}

var root = &command{name: "pixie", summary: "Pixie: gates, hints and Pet for coding agents"}

// register adds a verb; called from init functions of the verb files.
func register(c *command) {
	if root.find(c.name) != nil {
		panic("pixie: verb registered twice: " + c.name)
	}
	root.subs = append(root.subs, c)
}

func (c *command) find(name string) *command {
	for _, s := range c.subs {
		if s.name == name {
			return s
		}
	}
	return nil
}

// usageError is a wrong invocation: exit 2 (or the command's usageCode), with the synopsis.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// exitCode ends a command with a code after it has printed what it had to say.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// execute runs the command path named by args under root.
func execute(ctx context.Context, io cmdIO, args []string) int {
	return root.execute(ctx, io, "", args)
}

// executeVerb runs `pixie <verb> args…` (the verbs' test entry points use it).
func executeVerb(ctx context.Context, verb string, args []string, io cmdIO) int {
	return execute(ctx, io, append([]string{verb}, args...))
}

func (c *command) path(parent string) string {
	if parent == "" {
		return c.name
	}
	return parent + " " + c.name
}

func isHelp(a string) bool { return a == "-h" || a == "--help" || a == "-help" || a == "help" }

func (c *command) execute(ctx context.Context, io cmdIO, parent string, args []string) int {
	full := c.path(parent)
	if c.raw != nil {
		return c.raw(ctx, io, args)
	}
	if len(c.subs) > 0 {
		if len(args) == 0 {
			c.printGroupHelp(io.stderr, full)
			return c.codeForUsage()
		}
		if isHelp(args[0]) {
			// `pixie help gate apply`, `pixie gate help apply`
			target, tfull := c, full
			for _, a := range args[1:] {
				s := target.find(a)
				if s == nil {
					fmt.Fprintf(io.stderr, "%s: unknown subcommand %q\n", tfull, a)
					return 2
				}
				target, tfull = s, s.path(tfull)
			}
			target.printHelp(io.stdout, tfull)
			return 0
		}
		s := c.find(args[0])
		if s == nil {
			what := "subcommand"
			if c == root {
				what = "verb"
			}
			fmt.Fprintf(io.stderr, "%s: unknown %s %q\n\n", full, what, args[0])
			c.printGroupHelp(io.stderr, full)
			return c.codeForUsage()
		}
		return s.execute(ctx, io, full, args[1:])
	}
	fs := c.flagSet(full)
	run := c.flags(fs)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		c.printLeafHelp(io.stdout, full, fs)
		return 0
	}
	if err == nil {
		err = c.checkArgs(pos)
	}
	if err == nil {
		err = run(ctx, io, pos)
	}
	return c.finish(io, full, fs, err)
}

func (c *command) flagSet(full string) *flag.FlagSet {
	fs := flag.NewFlagSet(full, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // problems are printed once, by finish
	fs.Usage = func() {}
	return fs
}

func (c *command) checkArgs(pos []string) error {
	lo, hi := c.nargs[0], c.nargs[1]
	if len(pos) >= lo && (hi < 0 || len(pos) <= hi) {
		return nil
	}
	plural := func(n int) string {
		if n == 1 {
			return "argument"
		}
		return "arguments"
	}
	switch {
	case hi < 0:
		return usagef("want at least %d %s, got %d", lo, plural(lo), len(pos))
	case lo == hi:
		return usagef("want %d %s, got %d", lo, plural(lo), len(pos))
	default:
		return usagef("want %d to %d arguments, got %d", lo, hi, len(pos))
	}
}

func (c *command) codeForUsage() int {
	if c.usageCode != 0 {
		return c.usageCode
	}
	return 2
}

// finish turns a leaf's outcome into an exit code, printing a problem exactly once.
func (c *command) finish(io cmdIO, full string, fs *flag.FlagSet, err error) int {
	if err == nil {
		return 0
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	var ue *usageError
	if errors.As(err, &ue) || isFlagError(err) {
		fmt.Fprintf(io.stderr, "%s: %s\n", full, err)
		fmt.Fprintf(io.stderr, "usage: %s\n", c.synopsis(full))
		fmt.Fprintf(io.stderr, "(%s --help lists its flags)\n", full)
		return c.codeForUsage()
	}
	return printError(io.stderr, err)
}

// isFlagError reports whether err came from the flag package's parser (an unknown flag, a bad
// value), which has no type of its own.
func isFlagError(err error) bool {
	var ce interface{ Code() string }
	if errors.As(err, &ce) {
		return false
	}
	m := err.Error()
	return strings.HasPrefix(m, "flag provided but not defined") || strings.HasPrefix(m, "invalid value") ||
		strings.HasPrefix(m, "invalid boolean") || strings.HasPrefix(m, "flag needs an argument") ||
		strings.HasPrefix(m, "bad flag syntax")
}

func (c *command) synopsis(full string) string {
	s := full
	if len(c.subs) > 0 {
		return s + " <subcommand> …"
	}
	if c.args != "" {
		s += " " + c.args
	}
	return s + " [flags]"
}

func (c *command) printHelp(w io.Writer, full string) {
	if len(c.subs) > 0 {
		c.printGroupHelp(w, full)
		return
	}
	if c.raw != nil {
		fmt.Fprintf(w, "usage: %s %s\n\n%s\n", full, c.args, c.summary)
		return
	}
	fs := c.flagSet(full)
	c.flags(fs)
	c.printLeafHelp(w, full, fs)
}

func (c *command) printLeafHelp(w io.Writer, full string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n", c.synopsis(full))
	if c.help != "" {
		fmt.Fprintln(w, strings.TrimSpace(c.help))
	} else {
		fmt.Fprintln(w, capitalise(c.summary)+".")
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// leaves lists every leaf beneath c with its path relative to c ("skills inspect PATH").
func (c *command) leaves(prefix string) [][2]string {
	var out [][2]string
	subs := append([]*command(nil), c.subs...)
	if c == root {
		sort.Slice(subs, func(i, j int) bool { return subs[i].name < subs[j].name })
	}
	for _, s := range subs {
		if s.hidden {
			continue
		}
		name := strings.TrimSpace(prefix + " " + s.name)
		if len(s.subs) > 0 && c != root {
			out = append(out, s.leaves(name)...)
			continue
		}
		if s.args != "" && c != root {
			name += " " + s.args
		}
		out = append(out, [2]string{name, s.summary})
	}
	return out
}

func (c *command) printGroupHelp(w io.Writer, full string) {
	if c == root {
		fmt.Fprintf(w, "usage: pixie <verb> [flags]\n\n%s.\n\nverbs:\n", c.summary)
	} else {
		fmt.Fprintf(w, "usage: %s <subcommand> [flags]\n\n%s.\n\nsubcommands:\n", full, capitalise(c.summary))
	}
	ls := c.leaves("")
	width := 0
	for _, l := range ls {
		if len(l[0]) > width && len(l[0]) <= 34 {
			width = len(l[0])
		}
	}
	for _, l := range ls {
		if len(l[0]) > width {
			fmt.Fprintf(w, "  %s\n  %-*s  %s\n", l[0], width, "", l[1])
			continue
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, l[0], l[1])
	}
	if c == root {
		fmt.Fprintln(w, "\n`pixie <verb> --help` shows a verb's subcommands and flags.")
	} else {
		fmt.Fprintf(w, "\n`%s <subcommand> --help` shows a subcommand's flags.\n", full)
	}
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// parseInterspersed parses flags that may come after positional arguments
// (`send "text" --session s`) and returns the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// withClient defines the connection flags (--url, --token, --home) on fs and hands body a
// client for the server they name. The client resolves its URL and token at its first request,
// so that a body checks its own arguments (a usage error) before a missing token is reported.
func withClient(fs *flag.FlagSet, body func(ctx context.Context, io cmdIO, c *apiClient, pos []string) error) runFunc {
	var cf clientFlags
	cf.add(fs)
	return func(ctx context.Context, io cmdIO, pos []string) error {
		return body(ctx, io, lazyClient(cf), pos)
	}
}

// one, optional and any are common nargs.
var (
	one      = [2]int{1, 1}
	two      = [2]int{2, 2}
	optional = [2]int{0, 1}
)
