// Command bench is `make bench`: it runs every Go benchmark in the module (or those matching
// -run) once with the given -benchtime, then the sustained-load run of internal/loadbench
// against real servers (bin/pixie, OPA), and prints the tables: each benchmark's ns/op and
// every custom metric it reported (p50/p99 latencies, RSS, throughput, …); the load rows'
// req/s, p50, p99 and ratios with their targets; the driver's cross-check against wrk; and the
// targets read from the Go benchmarks (the RSS with ten modules warm).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/pixie-dev/pixie/internal/loadbench"
)

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

type row struct {
	pkg, name string
	n         string
	metrics   map[string]string
}

// rssTarget is issue 15's target for the server's RSS with ten modules warm, in MiB.
const rssTarget = 512

func main() {
	if len(os.Args) > 1 && os.Args[1] == "soak" {
		soakMain(os.Args[2:])
		return
	}
	run := flag.String("run", ".", "Go benchmark regexp (\"\" or -go=false: none)")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	pkgs := flag.String("pkgs", "./...", "packages")
	goBench := flag.Bool("go", true, "run the Go benchmarks")
	load := flag.Bool("load", true, "run the sustained-load rows (internal/loadbench)")
	loadDur := flag.Duration("load-duration", 10*time.Second, "time of each load row at each connection count")
	loadRounds := flag.Int("load-rounds", 1, "split each load row's time into this many interleaved runs")
	loadRows := flag.String("load-rows", "", "regexp of the load rows to run (default all)")
	pixieBin := flag.String("pixie", "bin/pixie", "the pixie binary the load rows start (make bench builds it)")
	serverCPUs := flag.String("server-cpus", "", "pin the servers to these CPUs (taskset -c list, e.g. 0)")
	driverCPUs := flag.String("driver-cpus", "", "pin the load driver to these CPUs (e.g. 1)")
	stormFaults := flag.String("storm-faults", "", "comma-separated fault guests of the storm rows (default all: "+strings.Join(loadbench.StormFaults(), ",")+")")
	wrkDur := flag.Duration("wrk", 5*time.Second, "time of each run of the driver's cross-check against wrk (0: none)")
	flag.Parse()
	if *stormFaults != "" {
		if err := loadbench.SetStormFaults(strings.Split(*stormFaults, ",")); err != nil {
			fail(err)
		}
	}

	var goRows []row
	var units []string
	var goErr error
	if *goBench && *run != "" {
		goRows, units, goErr = goBenchmarks(*run, *benchtime, *pkgs)
	}
	var rep *loadbench.Report
	var wrk []loadbench.WrkCheck
	var wrkErr, loadErr error
	if *load {
		rep, wrk, wrkErr, loadErr = loadRun(*pixieBin, *loadDur, *loadRounds, *loadRows, *serverCPUs, *driverCPUs, *wrkDur)
	}

	if goRows != nil || goErr != nil {
		printGo(goRows, units)
	}
	if rep != nil {
		rep.Print(os.Stdout)
	}
	if wrkErr != nil {
		fmt.Printf("\nDriver cross-check against wrk: %v\n", wrkErr)
	} else if wrk != nil {
		loadbench.PrintWrk(os.Stdout, wrk)
	}
	if goRows != nil {
		printGoTargets(goRows)
	}
	switch {
	case goErr != nil:
		fail(goErr)
	case loadErr != nil:
		fail(loadErr)
	}
}

// goBenchmarks runs the Go benchmarks, their output going to stderr as it comes, and returns
// their rows and the units of their metrics.
func goBenchmarks(run, benchtime, pkgs string) ([]row, []string, error) {
	args := []string{"test", "-run", "^$", "-bench", run, "-benchtime", benchtime, "-count", "1"}
	args = append(args, strings.Fields(pkgs)...)
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	rows, units := parse(io.TeeReader(out, os.Stderr))
	if err := cmd.Wait(); err != nil {
		return rows, units, fmt.Errorf("go test: %w", err)
	}
	return rows, units, nil
}

// printGo prints the Go benchmarks' table.
func printGo(rows []row, units []string) {
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
}

// printGoTargets prints the targets read from the Go benchmarks: the server's RSS with ten
// modules warm (BenchmarkServerRSS10Modules).
func printGoTargets(rows []row) {
	fmt.Println("\nTargets from the Go benchmarks (printed, not asserted):")
	for _, r := range rows {
		if r.name != "BenchmarkServerRSS10Modules" {
			continue
		}
		v, err := strconv.ParseFloat(r.metrics["rss-MiB"], 64)
		if err != nil {
			fmt.Printf("  server RSS, 10 modules warm: no figure (%q)\n", r.metrics["rss-MiB"])
			return
		}
		verdict := "MISSED"
		if v <= rssTarget {
			verdict = "met"
		}
		fmt.Printf("  server RSS, 10 modules warm ≤ %d MiB: %.0f MiB  %s\n", rssTarget, v, verdict)
		return
	}
	fmt.Println("  server RSS, 10 modules warm: BenchmarkServerRSS10Modules did not run")
}

// loadRun runs the sustained-load rows and the wrk cross-check against the servers it starts
// (stopped before it returns, also on Ctrl-C).
func loadRun(pixieBin string, d time.Duration, rounds int, only, serverCPUs, driverCPUs string, wrkDur time.Duration) (*loadbench.Report, []loadbench.WrkCheck, error, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.Getwd()
	if err != nil {
		return nil, nil, nil, err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return nil, nil, nil, fmt.Errorf("run the bench from the repository root (make bench): %w", err)
	}
	bin, err := filepath.Abs(pixieBin)
	if err != nil {
		return nil, nil, nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, nil, nil, fmt.Errorf("the load rows need the pixie binary (make build): %w", err)
	}
	var opts loadbench.Options
	opts.Duration, opts.Rounds, opts.Log = d, rounds, os.Stderr
	if only != "" {
		if opts.Only, err = regexp.Compile(only); err != nil {
			return nil, nil, nil, err
		}
	}
	if driverCPUs != "" {
		if err := loadbench.PinDriver(driverCPUs); err != nil {
			return nil, nil, nil, err
		}
	}
	e, err := loadbench.NewEnv(root, bin, os.Stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	defer e.Close()
	e.ServerCPUs = serverCPUs
	fmt.Fprintln(os.Stderr, "\n## sustained load: preparing the rows")
	rep := loadbench.Run(ctx, e, loadbench.Rows(), opts)
	if wrkDur <= 0 || ctx.Err() != nil {
		return rep, nil, nil, ctx.Err()
	}
	wrk, werr := loadbench.CrossCheckWrk(ctx, e, []int{1, 8}, wrkDur)
	return rep, wrk, werr, ctx.Err()
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
