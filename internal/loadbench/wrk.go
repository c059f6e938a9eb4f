package loadbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WrkCheck is one cross-check of the driver against wrk: GET /healthz on the main server at
// Conns connections, the driver's run and wrk's, one right after the other.
type WrkCheck struct {
	Conns              int
	Driver             *Measurement
	WrkReqPerSec       float64
	WrkP50, WrkP99     time.Duration
	WrkThreads         int
	DriverErr, WrkErr  string
	LoadBefore, LoadAt string
}

// CrossCheckWrk measures GET /healthz on the main server with the driver and with wrk (Debian's
// wrk package), d each, at each connection count: if the driver reaches what wrk reaches, it is
// not what limits the table's rows. An error when wrk is not installed.
func CrossCheckWrk(ctx context.Context, e *Env, conns []int, d time.Duration) ([]WrkCheck, error) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		return nil, errors.New("wrk is not installed (apt-get install wrk): the driver's cross-check is skipped")
	}
	p, err := MainPixie(ctx, e)
	if err != nil {
		return nil, err
	}
	req := Request{Method: "GET", Path: "/healthz", Want: []string{`"ok"`}}
	plan := &Plan{Addrs: []string{p.Addr}, Request: func(int) Request { return req }}
	var out []WrkCheck
	for _, c := range conns {
		w := WrkCheck{Conns: c, WrkThreads: min(c, 2), LoadBefore: loadAvg()}
		if m, err := measure(ctx, plan, c, d, 0); err != nil {
			w.DriverErr = err.Error()
		} else {
			w.Driver = m
		}
		args := []string{"-t", strconv.Itoa(w.WrkThreads), "-c", strconv.Itoa(c), "-d", fmt.Sprintf("%ds", max(int(d.Seconds()), 1)), "--latency", p.URL + "/healthz"}
		raw, err := exec.CommandContext(ctx, wrk, args...).CombinedOutput()
		if err != nil {
			w.WrkErr = fmt.Sprintf("wrk %s: %v: %s", strings.Join(args, " "), err, raw)
		} else if err := parseWrk(string(raw), &w); err != nil {
			w.WrkErr = err.Error()
		}
		w.LoadAt = loadAvg()
		out = append(out, w)
	}
	return out, nil
}

var (
	wrkRate    = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkPercent = regexp.MustCompile(`(?m)^\s+(50|99)(?:\.0+)?%\s+([0-9.]+)(us|ms|s)\s*$`)
)

// parseWrk reads wrk's requests per second and its 50 % and 99 % latencies (--latency).
func parseWrk(out string, w *WrkCheck) error {
	m := wrkRate.FindStringSubmatch(out)
	if m == nil {
		return fmt.Errorf("no Requests/sec in wrk's output: %s", out)
	}
	w.WrkReqPerSec, _ = strconv.ParseFloat(m[1], 64)
	for _, p := range wrkPercent.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(p[2], 64)
		unit := map[string]float64{"us": 1e3, "ms": 1e6, "s": 1e9}[p[3]]
		d := time.Duration(v * unit)
		if p[1] == "50" {
			w.WrkP50 = d
		} else {
			w.WrkP99 = d
		}
	}
	return nil
}

// PrintWrk writes the cross-check's table.
func PrintWrk(w io.Writer, checks []WrkCheck) {
	fmt.Fprintf(w, "\nDriver cross-check against wrk (GET /healthz, main server, one right after the other):\n")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "conns\tdriver req/s\tdriver p50 ms\tdriver p99 ms\twrk req/s\twrk p50 ms\twrk p99 ms\tdriver/wrk\tload avg\t\n")
	for _, c := range checks {
		if c.Driver == nil || c.WrkErr != "" {
			fmt.Fprintf(tw, "%d\t%s\t\t\t%s\t\t\t\t\t\n", c.Conns, oneLine(c.DriverErr), oneLine(c.WrkErr))
			continue
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t%.0f\t%s\t%s\t%.2f×\t%s\t\n", c.Conns, c.Driver.ReqPerSec(), ms(c.Driver.Hist.Quantile(0.5)),
			ms(c.Driver.Hist.Quantile(0.99)), c.WrkReqPerSec, ms(c.WrkP50), ms(c.WrkP99), c.Driver.ReqPerSec()/c.WrkReqPerSec, c.LoadAt)
	}
	tw.Flush()
}
