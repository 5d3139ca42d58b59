package run

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// chart is one SVG chart of the HTML report: a plot area of W×H pixels inside margins
// that hold the axes, their ticks and their labels (with units).
type chart struct {
	Title          string
	W, H           float64
	XLabel, YLabel string
	XTicks, YTicks []tick
	Lines          []chartLine
	Paths          []chartPath
	Areas          []chartArea // filled, drawn first: a stacked area chart's layers
	Marks          []chartMark
	Legend         []legendItem
	Note           string

	xmax, ymax float64
}

// Margins of every chart, in pixels.
const (
	chartLeft   = 64.0
	chartRight  = 16.0
	chartTop    = 12.0
	chartBottom = 44.0
)

// OuterW and OuterH are the SVG's size.
func (c chart) OuterW() float64 { return c.W + chartLeft + chartRight }
func (c chart) OuterH() float64 { return c.H + chartTop + chartBottom }

// Left, Top and Bottom place the plot area and the axis labels.
func (c chart) Left() float64 { return chartLeft }
func (c chart) Top() float64  { return chartTop }
func (c chart) XLabelY() float64 {
	return c.H + 38
}
func (c chart) YLabelX() float64 { return -c.H / 2 }
func (c chart) TickEnd() float64 { return c.H + 5 }

type tick struct {
	Pos   float64 // pixels from the plot area's left (x) or top (y)
	Label string
}

type chartLine struct {
	Class  string
	Points string
}

// chartPath draws many horizontal segments as one path.
type chartPath struct {
	Class string
	D     string
	Width float64
}

// chartArea is a filled polygon.
type chartArea struct {
	Class  string
	Points string
	Title  string
}

type chartMark struct {
	X, W  float64
	Label string
}

type legendItem struct{ Class, Label string }

// newChart sets up a chart whose axes run from 0 to at least xmax and ymax, on nice
// ticks.
func newChart(title, xLabel, yLabel string, w, h, xmax, ymax float64) chart {
	c := chart{Title: title, W: w, H: h, XLabel: xLabel, YLabel: yLabel}
	var xs, ys []float64
	c.xmax, xs = niceTicks(xmax)
	c.ymax, ys = niceTicks(ymax)
	for _, x := range xs {
		c.XTicks = append(c.XTicks, tick{Pos: c.x(x), Label: tickLabel(x, xs)})
	}
	for _, y := range ys {
		c.YTicks = append(c.YTicks, tick{Pos: c.y(y), Label: tickLabel(y, ys)})
	}
	return c
}

func (c chart) x(v float64) float64 { return v / c.xmax * c.W }
func (c chart) y(v float64) float64 { return c.H - v/c.ymax*c.H }

// line adds a polyline through (xs[i], ys[i]).
func (c *chart) line(class, label string, xs, ys []float64) {
	var b strings.Builder
	for i := range xs {
		fmt.Fprintf(&b, "%.1f,%.1f ", c.x(xs[i]), c.y(ys[i]))
	}
	c.Lines = append(c.Lines, chartLine{Class: class, Points: strings.TrimSpace(b.String())})
	c.Legend = append(c.Legend, legendItem{Class: class, Label: label})
}

// niceTicks returns an axis end at or above max and its ticks: about six, on steps of
// 1, 2 or 5 times a power of ten, from 0.
func niceTicks(max float64) (end float64, ticks []float64) {
	if !(max > 0) || math.IsInf(max, 0) {
		max = 1
	}
	raw := max / 6
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := pow * 10
	for _, m := range []float64{1, 2, 5, 10} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	n := math.Ceil(max/step - 1e-9)
	for i := 0.0; i <= n; i++ {
		ticks = append(ticks, roundTo(i*step, step))
	}
	return n * step, ticks
}

func roundTo(x, step float64) float64 {
	d := math.Max(0, -math.Floor(math.Log10(step)))
	p := math.Pow(10, d)
	return math.Round(x*p) / p
}

// tickLabel writes v with as many decimals as the ticks' step needs.
func tickLabel(v float64, ticks []float64) string {
	step := 1.0
	if len(ticks) > 1 {
		step = ticks[1] - ticks[0]
	}
	d := int(math.Max(0, -math.Floor(math.Log10(step)+1e-9)))
	return fmt.Sprintf("%.*f", d, v)
}

// cdf returns the points of the empirical distribution of xs as a step line, in
// percent of n (jobs never picked up keep it below 100 %).
func cdf(xs []float64, n int) (px, py []float64) {
	s := slices.Clone(xs)
	sort.Float64s(s)
	px, py = []float64{0}, []float64{0}
	for i, x := range s {
		px = append(px, x, x)
		py = append(py, float64(i)/float64(n)*100, float64(i+1)/float64(n)*100)
	}
	return px, py
}

// pickups are the jobs' pickup latencies: started − queued.
func pickups(jobs []JobTimes) []float64 {
	var out []float64
	for _, j := range jobs {
		if j.Started != nil {
			out = append(out, *j.Started-j.Queued)
		}
	}
	return out
}

// pickupCDF is the distribution of pickup latencies of Gantry and, if measured, of
// the floor.
func pickupCDF(r *Report) *chart {
	if len(r.Jobs) == 0 {
		return nil
	}
	g := pickups(r.Jobs)
	var f []float64
	if r.Floor != nil {
		f = pickups(r.Floor.Jobs)
	}
	xmax := 0.0
	for _, x := range append(slices.Clone(g), f...) {
		xmax = math.Max(xmax, x)
	}
	c := newChart("pickup latency distribution", "pickup latency: job queued → started by a runner (s)", "jobs picked up (%)", 900, 300, xmax, 100)
	px, py := cdf(g, len(r.Jobs))
	c.line("g", "Gantry", px, py)
	if r.Floor != nil && len(r.Floor.Jobs) > 0 {
		px, py = cdf(f, len(r.Floor.Jobs))
		c.line("fl", "floor (oracle, same cluster, same jobs)", px, py)
	}
	return &c
}

// maxTimelineJobs bounds the per-job timeline: above it the chart would be a blur.
const maxTimelineJobs = 5000

// timeline draws each job as a row, in order of queueing: waiting for its runner pod
// (queued → pod created), the pod starting (→ Running), the runner waiting for the job
// (→ started), the job running (→ done). xmax is shared with the other timeline so
// the two compare at a glance.
func timeline(title string, jobs []JobTimes, xmax float64) *chart {
	if len(jobs) == 0 || len(jobs) > maxTimelineJobs {
		return nil
	}
	h := math.Min(600, math.Max(200, float64(len(jobs))*3))
	c := newChart(title, "time since the first job was queued (s)", "jobs, in order queued", 900, h, xmax, float64(len(jobs)))
	row := c.H / c.ymax
	var wait, start, idle, run strings.Builder
	seg := func(b *strings.Builder, i int, from float64, to *float64) {
		if to == nil || *to < from {
			return
		}
		y := c.y(float64(i) + 0.5)
		fmt.Fprintf(b, "M%.1f %.2fH%.1f", c.x(from), y, math.Max(c.x(*to), c.x(from)+0.5))
	}
	for i, j := range jobs {
		if j.Pod != nil {
			seg(&wait, i, j.Queued, j.Pod)
			seg(&start, i, *j.Pod, j.Running)
			if j.Running != nil {
				seg(&idle, i, *j.Running, j.Started)
			}
		} else {
			seg(&wait, i, j.Queued, j.Started)
		}
		if j.Started != nil {
			seg(&run, i, *j.Started, j.Done)
		}
	}
	width := math.Max(0.5, row*0.9)
	for _, p := range []struct {
		class, label string
		d            *strings.Builder
	}{
		{"tw", "queued → runner pod created", &wait},
		{"ts", "pod created → Running", &start},
		{"ti", "Running → job started", &idle},
		{"tr", "job running", &run},
	} {
		c.Paths = append(c.Paths, chartPath{Class: p.class, D: p.d.String(), Width: width})
		c.Legend = append(c.Legend, legendItem{Class: p.class, Label: p.label})
	}
	return &c
}

// timelineEnd is the last moment of any job's life in either run.
func timelineEnd(runs ...[]JobTimes) float64 {
	end := 0.0
	for _, jobs := range runs {
		for _, j := range jobs {
			for _, t := range []*float64{&j.Queued, j.Pod, j.Running, j.Started, j.Done} {
				if t != nil {
					end = math.Max(end, *t)
				}
			}
		}
	}
	return end
}

// overTime is the queued jobs and the runners, sampled each second, with the faults
// shaded.
func overTime(r *Report) chart {
	ymax, tmax := 0, 0.0
	for _, s := range r.Samples {
		ymax = max(ymax, s.Queued, s.Pending+s.Idle+s.Busy)
		tmax = math.Max(tmax, s.T)
	}
	c := newChart("queued jobs and runners over time", "time since the first job was queued (s)", "jobs, runners", 900, 300, tmax, float64(ymax))
	var ts, q, run, busy []float64
	for _, s := range r.Samples {
		ts = append(ts, s.T)
		q = append(q, float64(s.Queued))
		run = append(run, float64(s.Pending+s.Idle+s.Busy))
		busy = append(busy, float64(s.Busy))
	}
	c.line("q", "queued jobs", ts, q)
	c.line("r", "runners (pending + idle + busy)", ts, run)
	c.line("b", "busy runners", ts, busy)
	if r.Faults != nil {
		for _, in := range r.Faults.Injections {
			x := c.x(in.StartSeconds)
			w := math.Max(2, c.x(in.EndSeconds)-x)
			c.Marks = append(c.Marks, chartMark{X: x, W: w, Label: in.Name})
		}
		if len(c.Marks) > 0 {
			c.Legend = append(c.Legend, legendItem{Class: "f", Label: "faults"})
		}
	}
	return c
}
