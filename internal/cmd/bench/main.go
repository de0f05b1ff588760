// Copyright 2026 The pleg_exporter Authors
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
// http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

// Command bench measures the exporter at 1k, 10k and 100k containers and
// writes docs/benchmarks.md and docs/benchmarks.png. Every ratio in the
// report comes from one run of this program, measured side by side:
//
//   - relist time: Go benchmarks of the exporter's relist cycle and of a
//     minimal client's bare ListPodSandbox + ListContainers, same server;
//   - crictl ps -a -o json against the same population (out of process);
//   - memory: the exporter binary against a fakecri process, peak (VmHWM)
//     and steady RSS between relists;
//   - scrapes: latency percentiles and relists caused by 1000 concurrent ones.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"image/color"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/pleg-exporter/pleg_exporter/internal/measure"
)

var (
	sizes   = []int{1000, 10000, 100000}
	outDir  = flag.String("out", "docs", "where benchmarks.md and benchmarks.png go")
	count   = flag.Int("count", 5, "benchmark repetitions (the median is reported)")
	crictl  = flag.String("crictl", "", "crictl binary (built by make bench)")
	workdir = flag.String("work", "", "scratch directory (default: a temp dir)")
)

type row struct {
	n                           int
	relist, bare                time.Duration
	crictl                      time.Duration
	crictlErr                   string
	payload                     int64
	peakRSS, steadyRSS          int64
	codeRSS                     int64 // file-backed pages: the binary's own code and data
	scrapeP50, scrapeP99        time.Duration
	scrapeQuietP99              time.Duration // no relist in flight
	floorP99                    time.Duration // /-/healthy, same conditions: the machine's own tail
	scrapeInProcess             time.Duration
	concurrentOK, relistsDuring int
}

func main() {
	flag.Parse()
	dir := *workdir
	if dir == "" {
		d, err := os.MkdirTemp("", "pleg-bench")
		check(err)
		defer os.RemoveAll(d)
		dir = d
	}
	bins := buildBins(dir)
	rows := map[int]*row{}
	for _, n := range sizes {
		rows[n] = &row{n: n}
	}
	fmt.Fprintln(os.Stderr, "bench: Go benchmarks (relist vs bare lists)...")
	goBench(rows)
	for _, n := range sizes {
		fmt.Fprintf(os.Stderr, "bench: %d containers: crictl, memory, scrapes...\n", n)
		processBench(rows[n], bins, dir)
	}
	report(rows)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type binaries struct{ exporter, fakecri string }

func buildBins(dir string) binaries {
	b := binaries{exporter: filepath.Join(dir, "pleg_exporter"), fakecri: filepath.Join(dir, "fakecri")}
	for out, pkg := range map[string]string{b.exporter: "./cmd/pleg_exporter", b.fakecri: "./internal/cmd/fakecri"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if o, err := cmd.CombinedOutput(); err != nil {
			check(fmt.Errorf("build %s: %v\n%s", pkg, err, o))
		}
	}
	return b
}

var benchLine = regexp.MustCompile(`^Benchmark(Relist|BareLists|Scrape)/containers=(\d+)-\d+\s+\d+\s+([\d.]+) ns/op`)

// goBench runs the relist and bare-list benchmarks one repetition at a
// time, alternating, so a slow spell of the machine (a 2-core VM shares its
// host) weighs on both sides of a ratio rather than on one.
func goBench(rows map[int]*row) {
	samples := map[string][]float64{}
	for i := 0; i < *count; i++ {
		cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^(BenchmarkRelist|BenchmarkBareLists|BenchmarkScrape)$",
			"-benchtime", "5x", "-count", "1", "./runtime/cri/", "./collector/")
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		check(err)
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if m := benchLine.FindStringSubmatch(sc.Text()); m != nil {
				ns, _ := strconv.ParseFloat(m[3], 64)
				samples[m[1]+"/"+m[2]] = append(samples[m[1]+"/"+m[2]], ns)
			}
		}
	}
	for _, n := range sizes {
		rows[n].relist = time.Duration(median(samples[fmt.Sprintf("Relist/%d", n)]))
		rows[n].bare = time.Duration(median(samples[fmt.Sprintf("BareLists/%d", n)]))
		rows[n].scrapeInProcess = time.Duration(median(samples[fmt.Sprintf("Scrape/%d", n)]))
	}
}

var median = measure.Median

func freeAddr() string {
	addr, err := measure.FreeAddr()
	check(err)
	return addr
}

func processBench(r *row, b binaries, dir string) {
	sock := filepath.Join(dir, fmt.Sprintf("cri-%d.sock", r.n))
	srv := exec.Command(b.fakecri, "--socket", sock, "--containers", strconv.Itoa(r.n))
	stdout, _ := srv.StdoutPipe()
	srv.Stderr = os.Stderr
	check(srv.Start())
	defer func() { srv.Process.Kill(); srv.Wait() }()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		check(fmt.Errorf("fakecri did not start: %q", line))
	}

	// crictl, the tool an operator would reach for, on the same population.
	if *crictl != "" {
		crictlBench(r, sock)
	}

	// The exporter binary, as deployed, with a short interval.
	addr := freeAddr()
	exp := exec.Command(b.exporter, "--runtime.endpoint=unix://"+sock, "--web.listen-address="+addr,
		"--runtime.max-recv-bytes=1073741824", "--web.max-requests=0", "--log.level=warn")
	exp.Stderr = os.Stderr
	check(exp.Start())
	defer func() { exp.Process.Kill(); exp.Wait() }()
	url := "http://" + addr + "/metrics"
	waitRelists(url, 2)
	r.payload = int64(metric(url, `pleg_relist_payload_bytes{rpc="ListContainers"}`))
	// Steady state: between relists (every 10s, the default).
	time.Sleep(5 * time.Second)
	r.steadyRSS = procStatus(exp.Process.Pid, "VmRSS")
	r.peakRSS = procStatus(exp.Process.Pid, "VmHWM")
	r.codeRSS = procStatus(exp.Process.Pid, "RssFile")

	// Scrape latency: sequential, then 1000 at once.
	r.scrapeP50, r.scrapeP99 = sequentialScrapes(url)
	r.concurrentOK, r.relistsDuring = concurrentScrapes(url)
	exp.Process.Kill()
	exp.Wait()

	// The same scrapes with no relist in flight: one relist, then none for
	// an hour. Apart, the two figures tell the exporter's own scrape cost
	// from the share of the machine a relist of this size takes.
	addr = freeAddr()
	quiet := exec.Command(b.exporter, "--runtime.endpoint=unix://"+sock, "--web.listen-address="+addr,
		"--runtime.max-recv-bytes=1073741824", "--relist.interval=1h", "--log.level=error")
	quiet.Stderr = os.Stderr
	check(quiet.Start())
	defer func() { quiet.Process.Kill(); quiet.Wait() }()
	url = "http://" + addr + "/metrics"
	waitRelists(url, 1)
	time.Sleep(time.Second)
	_, r.scrapeQuietP99 = sequentialScrapes(url)
	_, r.floorP99 = sequentialScrapes("http://" + addr + "/-/healthy")
}

// crictlBench times crictl ps -a -o json, one process per call.
func crictlBench(r *row, sock string) {
	var runs []float64
	for i := 0; i < *count; i++ {
		t0 := time.Now()
		cmd := exec.Command(*crictl, "--runtime-endpoint", "unix://"+sock, "--image-endpoint", "unix://"+sock, "--timeout", "2m", "ps", "-a", "-o", "json")
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.Discard, &errb
		if err := cmd.Run(); err != nil {
			r.crictlErr = lastLine(errb.String())
			break
		}
		runs = append(runs, float64(time.Since(t0)))
	}
	r.crictl = time.Duration(median(runs))
}

// concurrentScrapes makes 1000 scrapes at once and returns how many were
// answered, and how many relists beyond the interval's happened meanwhile
// (relists the scrapes would have caused).
func concurrentScrapes(url string) (ok, extraRelists int) {
	before := metric(url, "pleg_relists_total")
	var wg sync.WaitGroup
	var mu sync.Mutex
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 1000}
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	start := time.Now()
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(url)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	// Relists expected from the interval alone over that time: the rest
	// would have been caused by scrapes.
	extraRelists = int(metric(url, "pleg_relists_total")-before) - int(elapsed/(10*time.Second))
	return ok, max(extraRelists, 0)
}

// sequentialScrapes times *count sets of 1000 scrapes, one after the other
// over one keep-alive connection as a Prometheus server scrapes, and returns
// the medians of the sets' p50 and p99: one noisy second of the host shows
// in one set, not in the figure.
func sequentialScrapes(url string) (p50, p99 time.Duration) {
	var p50s, p99s []float64
	for set := 0; set < *count; set++ {
		var lat []float64
		for i := 0; i < 1000; i++ {
			t0 := time.Now()
			get(url)
			lat = append(lat, float64(time.Since(t0)))
		}
		sort.Float64s(lat)
		p50s = append(p50s, lat[len(lat)/2])
		p99s = append(p99s, lat[len(lat)*99/100])
	}
	return time.Duration(median(p50s)), time.Duration(median(p99s))
}

// lastLine keeps crictl's error, the last line of its stderr.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.Index(s, "msg="); i >= 0 {
		s = strings.Trim(s[i+4:], `"`)
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

func get(url string) string {
	resp, err := http.Get(url)
	check(err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func metric(url, series string) float64 {
	for _, l := range strings.Split(get(url), "\n") {
		if strings.HasPrefix(l, series+" ") {
			v, _ := strconv.ParseFloat(strings.TrimPrefix(l, series+" "), 64)
			return v
		}
	}
	return 0
}

func waitRelists(url string, n float64) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if metric(url, "pleg_relists_total") >= n && metric(url, "pleg_runtime_up") == 1 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	check(fmt.Errorf("exporter did not relist %v times", n))
}

func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	check(err)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func ms(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f ms", float64(d)/1e6)
}

func report(rows map[int]*row) {
	var b strings.Builder
	cpu := runtime.NumCPU()
	fmt.Fprintf(&b, `# Benchmarks

Generated by `+"`make bench`"+` (internal/cmd/bench) on %s, %d CPUs, %s. Every ratio below comes from this one run,
measured side by side on the same machine; medians of %d repetitions, the relist and bare-list benchmarks
alternating repetition by repetition.

Population: a busy node, 81%% exited containers, a tenth running, one sandbox per ten containers, each container
with the kubelet's labels and annotations plus ~1.6 KB more (a preStop hook's worth): ~2.3 KiB per container on the
wire. The server is an in-process CRI server (`+"`internal/fakecri`"+`, real gRPC and protobuf) with its send limit raised so
the answers past 16 MiB can be timed at all; containerd would refuse them (the exporter then counts through the
fallback, see README).

## Relist cycle vs. the bare round trips

*Relist* is the exporter's whole cycle (both unfiltered lists, state counting, payload accounting). *Bare* is a
minimal client's `+"`ListPodSandbox`"+` + `+"`ListContainers`"+`, decoded into messages. *crictl* is `+"`crictl ps -a -o json`"+`
(cri-tools v1.37.0, one process per call, as an operator runs it).

| containers | answer size | relist | bare lists | relist / bare | crictl ps -a -o json | relist / crictl |
|---:|---:|---:|---:|---:|---:|---:|
`, time.Now().UTC().Format("2006-01-02"), cpu, runtime.GOARCH, *count)
	for _, n := range sizes {
		r := rows[n]
		cr, ratio := ms(r.crictl), "—"
		if r.crictlErr != "" {
			cr = "fails: " + r.crictlErr
		} else if r.crictl > 0 {
			ratio = fmt.Sprintf("%.2f×", float64(r.relist)/float64(r.crictl))
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %.2f× | %s | %s |\n", n, mib(r.payload), ms(r.relist), ms(r.bare),
			float64(r.relist)/float64(r.bare), cr, ratio)
	}
	memorySection(&b, rows)
	scrapeSection(&b, rows)
	check(os.MkdirAll(*outDir, 0o755))
	path := filepath.Join(*outDir, "benchmarks.md")
	// Sections written by the other benchmarks (make bench-relist,
	// make bench-status) follow the first of their headings: keep them.
	if old, err := os.ReadFile(path); err == nil {
		for _, h := range keptSections {
			if i := strings.Index(string(old), "\n"+h); i >= 0 {
				b.WriteString(string(old[i:]))
				break
			}
		}
	}
	check(os.WriteFile(path, []byte(b.String()), 0o644))
	check(plotPNG(rows, filepath.Join(*outDir, "benchmarks.png")))
	fmt.Print(b.String())
}

// memorySection is the exporter process's RSS at each size.
func memorySection(b *strings.Builder, rows map[int]*row) {
	fmt.Fprintf(b, `
## Memory of the exporter process

The exporter binary against a fakecri process, relisting every 10 s (the default). *Peak* is VmHWM after two
relists; *steady* is VmRSS 5 s after a relist. Nothing but aggregates survives a relist. *Code* is the file-backed
part of the steady RSS (RssFile): the pages of the static binary itself, shared with the page cache and reclaimable,
the same at every size.

| containers | largest answer | peak RSS | peak / (1.5 × answer + 20 MiB) | steady RSS | of which code |
|---:|---:|---:|---:|---:|---:|
`)
	for _, n := range sizes {
		r := rows[n]
		budget := 1.5*float64(r.payload) + 20*(1<<20)
		fmt.Fprintf(b, "| %d | %s | %s | %.2f | %s | %s |\n", n, mib(r.payload), mib(r.peakRSS), float64(r.peakRSS)/budget, mib(r.steadyRSS), mib(r.codeRSS))
	}
	fmt.Fprintf(b, `
Where the ratio is above 1 (the smallest node), it is the fixed part: the binary's code pages plus the Go runtime's
minimum heap are more than the budget's 20 MiB. What grows with the answer, peak minus steady RSS, stays within
1.5× of the answer at every size.
`)
}

// scrapeSection is the scrape latencies and the load on the runtime.
func scrapeSection(b *strings.Builder, rows map[int]*row) {
	fmt.Fprintf(b, `
## Scrapes

A scrape reads the latest aggregates; it never calls the runtime. Sets of 1000 sequential scrapes of the real binary
over HTTP (exporter self-metrics included, relists running in the background every 10 s; the medians of the sets'
p50 and p99), then 1000 at once with
`+"`--web.max-requests=0`"+`; *extra relists* are relists beyond what the interval explains during that burst. *p99, no
relist in flight* repeats the sequential scrapes against an exporter that relisted once and then waits an hour;
*floor* is the same for `+"`/-/healthy`"+`, a handler that writes one line: the tail of an HTTP round trip on this machine.

| containers | handler, in process | HTTP p50 | HTTP p99 | HTTP p99, no relist in flight | floor p99 | 1000 concurrent: answered | extra relists caused |
|---:|---:|---:|---:|---:|---:|---:|---:|
`)
	for _, n := range sizes {
		r := rows[n]
		inproc := "—"
		if r.scrapeInProcess > 0 {
			inproc = fmt.Sprintf("%.0f µs", float64(r.scrapeInProcess)/1e3)
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %d | %d |\n", n, inproc, ms(r.scrapeP50), ms(r.scrapeP99), ms(r.scrapeQuietP99), ms(r.floorP99), r.concurrentOK, r.relistsDuring)
	}
	fmt.Fprintf(b, `
*Handler, in process* is `+"`BenchmarkScrape`"+` (the product's metrics through promhttp, the snapshot of a 1k or a 100k
node: the same aggregates). The HTTP figures add the loopback round trip, gzip and the exporter's Go and process
self-metrics (the process collector's reads of `+"`/proc`"+` are most of the p50; `+"`--web.disable-exporter-metrics`"+`
drops them). The exporter's own work per scrape, the in-process handler, does not grow with the container count.
The HTTP tail follows the machine's: the floor rises with the size of the last relist too, because after a relist
of a large answer this 2-core VM stays noisy for every process on it, the floor's own handler included. With relists in the background, a scrape that lands during one also
shares the two cores with it: at 100k containers the fake runtime marshals and the exporter reads a 241 MiB answer
for about a second of every ten; on a real node the runtime does that work for each of the kubelet's own relists.
With the default `+"`--web.max-requests=40`"+` scrapes beyond 40 in flight get a
503 by design.

## Load added to the runtime

One relist — two list calls — per `+"`--relist.interval`"+` (10 s by default), whatever the number of scrapers. The kubelet
itself relists every second, so the default adds 10 %% to the runtime's list calls; at 100k containers one relist
costs the runtime what one of the kubelet's costs.

![time and memory vs. containers](benchmarks.png)
`)
}

func plotPNG(rows map[int]*row, path string) error {
	line := func(p *plot.Plot, label string, c color.Color, f func(*row) float64) {
		var pts plotter.XYs
		for _, n := range sizes {
			if v := f(rows[n]); v > 0 {
				pts = append(pts, plotter.XY{X: float64(n), Y: v})
			}
		}
		if len(pts) == 0 {
			return
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return
		}
		l.Color, s.Color = c, c
		p.Add(l, s)
		p.Legend.Add(label, l, s)
	}
	tp := plot.New()
	tp.Title.Text = "Relist time"
	tp.X.Label.Text, tp.Y.Label.Text = "containers", "milliseconds"
	tp.X.Scale, tp.Y.Scale = plot.LogScale{}, plot.LogScale{}
	tp.X.Tick.Marker, tp.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	line(tp, "exporter relist", color.RGBA{R: 200, A: 255}, func(r *row) float64 { return float64(r.relist) / 1e6 })
	line(tp, "bare lists", color.RGBA{B: 200, A: 255}, func(r *row) float64 { return float64(r.bare) / 1e6 })
	line(tp, "crictl ps -a -o json", color.RGBA{G: 150, A: 255}, func(r *row) float64 { return float64(r.crictl) / 1e6 })
	tp.Legend.Top, tp.Legend.Left = true, true

	mp := plot.New()
	mp.Title.Text = "Exporter memory"
	mp.X.Label.Text, mp.Y.Label.Text = "containers", "MiB"
	mp.X.Scale, mp.Y.Scale = plot.LogScale{}, plot.LogScale{}
	mp.X.Tick.Marker, mp.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	line(mp, "peak RSS", color.RGBA{R: 200, A: 255}, func(r *row) float64 { return float64(r.peakRSS) / (1 << 20) })
	line(mp, "steady RSS", color.RGBA{R: 120, G: 60, A: 255}, func(r *row) float64 { return float64(r.steadyRSS) / (1 << 20) })
	line(mp, "largest answer", color.RGBA{B: 200, A: 255}, func(r *row) float64 { return float64(r.payload) / (1 << 20) })
	mp.Legend.Top, mp.Legend.Left = true, true

	img := vgimg.New(vg.Points(1000), vg.Points(400))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadY: vg.Points(10), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}
	plots := [][]*plot.Plot{{tp, mp}}
	canvases := plot.Align(plots, tiles, dc)
	tp.Draw(canvases[0][0])
	mp.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	return err
}

// keptSections are headings of docs/benchmarks.md that other tools own
// (the Docker estimate, make bench-relist, make bench-status), in the order
// they appear: make bench rewrites what comes before the first of them.
var keptSections = []string{"## Docker container list", "## The list part since the lister refactor", "## The status pass's cost"}
