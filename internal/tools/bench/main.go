// Command bench is `make bench`: it runs every Go benchmark in the module (or those matching
// -run) once with the given -benchtime, and prints one table: each benchmark's ns/op and every
// custom metric it reported (p50/p99 latencies, RSS, throughput, …).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"
)

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

type row struct {
	pkg, name string
	n         string
	metrics   map[string]string
}

func main() {
	run := flag.String("run", ".", "benchmark regexp")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	pkgs := flag.String("pkgs", "./...", "packages")
	flag.Parse()

	args := []string{"test", "-run", "^$", "-bench", *run, "-benchtime", *benchtime, "-count", "1"}
	args = append(args, strings.Fields(*pkgs)...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fail(err)
	}
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	rows, units := parse(io.TeeReader(out, os.Stderr))
	werr := cmd.Wait()

	fmt.Println()
	fmt.Println("## make bench —", len(rows), "benchmarks")
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "package\tbenchmark\truns\t%s\n", strings.Join(units, "\t"))
	for _, r := range rows {
		cells := make([]string, len(units))
		for i, u := range units {
			cells[i] = r.metrics[u]
			if cells[i] == "" {
				cells[i] = "-"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.pkg, r.name, r.n, strings.Join(cells, "\t"))
	}
	tw.Flush()
	if werr != nil {
		fail(fmt.Errorf("go test: %w", werr))
	}
}

func parse(r io.Reader) ([]row, []string) {
	var rows []row
	seen := map[string]bool{}
	var units []string
	var pending []row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := benchLine.FindStringSubmatch(line); m != nil {
			rw := row{name: m[1], n: m[2], metrics: map[string]string{}}
			f := strings.Fields(m[3])
			for i := 0; i+1 < len(f); i += 2 {
				rw.metrics[f[i+1]] = f[i]
				if !seen[f[i+1]] {
					seen[f[i+1]] = true
					units = append(units, f[i+1])
				}
			}
			pending = append(pending, rw)
			continue
		}
		if strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "ok\t") || strings.HasPrefix(line, "FAIL") {
			f := strings.Fields(line)
			pkg := ""
			if len(f) > 1 {
				pkg = strings.TrimPrefix(f[1], "github.com/pixie-dev/pixie/")
			}
			for i := range pending {
				pending[i].pkg = pkg
			}
			rows = append(rows, pending...)
			pending = nil
		}
	}
	rows = append(rows, pending...)
	sort.SliceStable(units, func(i, j int) bool { return units[i] == "ns/op" && units[j] != "ns/op" })
	return rows, units
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
