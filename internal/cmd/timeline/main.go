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

// Command timeline draws a fault's timeline recorded by the end-to-end
// test (stack.Timeline) as a PNG: the relist age the exporter and the
// kubelet report against the 3-minute threshold, the ListContainers answer
// against the 16 MiB limit, when each alert first fired and when the
// kubelet said "PLEG is not healthy". make plot-overflow runs it.
//
//	go run ./internal/cmd/timeline TIMELINE.json OUT.png
package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/pleg-exporter/pleg_exporter/internal/stack"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: timeline TIMELINE.json OUT.png")
		os.Exit(2)
	}
	tl, err := stack.ReadTimeline(os.Args[1])
	if err == nil {
		err = draw2(tl, os.Args[2])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "timeline:", err)
		os.Exit(1)
	}
}

var (
	red    = color.RGBA{R: 200, A: 255}
	blue   = color.RGBA{B: 200, A: 255}
	grey   = color.RGBA{R: 120, G: 120, B: 120, A: 255}
	marks  = []color.RGBA{{R: 230, G: 120, A: 255}, {G: 150, A: 255}, {R: 150, B: 150, A: 255}, {G: 120, B: 160, A: 255}}
	dashed = []vg.Length{vg.Points(4), vg.Points(3)}
)

// draw2 draws the two panels, one above the other, on one time axis.
func draw2(tl *stack.Timeline, path string) error {
	if len(tl.Series["exporter_age"]) == 0 {
		return fmt.Errorf("the timeline has no exporter_age series")
	}
	age := plot.New()
	age.Title.Text = "Relist age: " + tl.What
	age.Y.Label.Text = "seconds since the last good relist"
	if err := lines(age, tl, []series{{"exporter_age", "pleg_exporter: pleg_last_seen_seconds", red}, {"kubelet_age", "kubelet: time() - kubelet_pleg_last_seen_seconds", blue}}); err != nil {
		return err
	}
	hline(age, tl, 180, "kubelet's threshold (3 min)")
	payload := plot.New()
	payload.X.Label.Text = "seconds after the kubelet's first failed relist (T0)"
	payload.Y.Label.Text = "ListContainers answer, % of 16 MiB"
	scaled := map[string][][2]float64{"payload_pct": scale(tl.Series["payload_ratio"], 100)}
	if err := lines(payload, &stack.Timeline{Series: scaled}, []series{{"payload_pct", "pleg_exporter: pleg_relist_payload_bytes / limit", red}}); err != nil {
		return err
	}
	hline(payload, tl, 100, "the kubelet's gRPC limit")
	lo, hi := math.Min(age.X.Min, payload.X.Min), math.Max(age.X.Max, payload.X.Max)
	for i, p := range []*plot.Plot{age, payload} {
		p.Y.Min = 0
		events(p, tl, i == 0)
		p.Legend.Top, p.Legend.Left = true, true
		p.X.Min, p.X.Max = lo, hi
		p.X.Tick.Marker = every30s{}
	}

	img := vgimg.New(vg.Points(1000), vg.Points(620))
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Points(10), PadY: vg.Points(16), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(16)}
	canvases := plot.Align([][]*plot.Plot{{age}, {payload}}, tiles, draw.New(img))
	age.Draw(canvases[0][0])
	payload.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

type series struct {
	key, label string
	c          color.Color
}

func lines(p *plot.Plot, tl *stack.Timeline, ss []series) error {
	for _, s := range ss {
		var pts plotter.XYs
		for _, v := range tl.Series[s.key] {
			pts = append(pts, plotter.XY{X: v[0], Y: v[1]})
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color, l.Width = s.c, vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.label, l)
	}
	return nil
}

func scale(vs [][2]float64, f float64) [][2]float64 {
	out := make([][2]float64, len(vs))
	for i, v := range vs {
		out[i] = [2]float64{v[0], v[1] * f}
	}
	return out
}

// hline is a grey dashed line at y across the plot's time range.
func hline(p *plot.Plot, tl *stack.Timeline, y float64, label string) {
	lo, hi := p.X.Min, p.X.Max
	l, err := plotter.NewLine(plotter.XYs{{X: lo, Y: y}, {X: hi, Y: y}})
	if err != nil {
		return
	}
	l.Color, l.Dashes = grey, dashed
	p.Add(l)
	p.Legend.Add(label, l)
}

// events are vertical lines: each alert's first firing, and the kubelet's
// "PLEG is not healthy", in the order they came.
func events(p *plot.Plot, tl *stack.Timeline, legend bool) {
	type ev struct {
		name string
		at   float64
	}
	var evs []ev
	for name, at := range tl.Alerts {
		evs = append(evs, ev{name + " fires", at})
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	evs = append(evs, ev{"kubelet: PLEG is not healthy", tl.NotHealthy})
	lo, hi := p.Y.Min, p.Y.Max
	for i, e := range evs {
		l, err := plotter.NewLine(plotter.XYs{{X: e.at, Y: lo}, {X: e.at, Y: hi}})
		if err != nil {
			continue
		}
		l.Color, l.Width = marks[i%len(marks)], vg.Points(1.2)
		if i == len(evs)-1 {
			l.Color, l.Width = color.Black, vg.Points(2)
		}
		l.Dashes = dashed
		p.Add(l)
		if legend {
			p.Legend.Add(fmt.Sprintf("%s (T0%+.0f s)", e.name, e.at), l)
		}
	}
}

// every30s ticks the time axis every 30 s, labelled every minute.
type every30s struct{}

func (every30s) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for x := math.Ceil(lo/30) * 30; x <= hi; x += 30 {
		t := plot.Tick{Value: x}
		if math.Mod(x, 60) == 0 {
			t.Label = fmt.Sprintf("%+.0f", x)
		}
		ts = append(ts, t)
	}
	return ts
}
