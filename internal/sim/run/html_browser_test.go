package run

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/fault"
)

// chromium finds a Chromium or Chrome binary: $GANTRY_CHROMIUM, else the usual names.
func chromium() string {
	if p := os.Getenv("GANTRY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browserReport is a burst of 500 jobs with its floor, a steady sample series and a
// fault, as run.Run would write it.
func browserReport() *Report {
	gJobs, gEvents := syntheticRun(500, 0.5, 0.02, "linux-")
	fJobs, fEvents := syntheticRun(500, 0.2, 0.004, floorPodPrefix)
	var samples []Sample
	for i := range 25 {
		samples = append(samples, Sample{T: float64(i), Queued: max(0, 500-50*i), Pending: min(500, 40*i), Busy: min(500, 30*i)})
	}
	sc := Scenarios["burst"]
	sc.Faults = &fault.Schedule{}
	u := browserUsage(gEvents)
	r := buildReport(sc, reportInputs{
		start: t0, jobs: gJobs, events: append(gEvents, u.exits...), samples: samples, finished: true, drained: true, usage: u.usageInputs,
		controller:  Controller{CPUSeconds: 6.4, PeakRSSBytes: 80 << 20, Processes: 1, KubeAPIRequests: map[string]int64{"GET": 40, "POST": 1500}},
		injections:  []fault.Injection{{Name: "webhooks dropped", Kind: fault.KindWebhookDrop, Injected: true, StartSeconds: 3, EndSeconds: 8}},
		audit:       kubeAudit{requests: map[string]int64{"create pods": 500, "create secrets": 500, "patch runners/status": 2000}},
		lastJobDone: at(24), drainedAt: at(28),
	})
	r.Floor = floorReport(floorRun{start: t0, end: at(20), jobs: fJobs, events: fEvents, finished: true, clusterDrained: true, cleanedUp: true,
		cpuSeconds: 0.2}, nil, r)
	gantryCut, floorCut := 51, 3
	r.WatchersCut, r.Floor.WatchersCut = &gantryCut, &floorCut
	return r
}

// browserUsage is a usage record for each runner pod of events: its repository one of
// five of an organization, the busiest first, and every tenth runner without a job.
func browserUsage(events []agent.Event) browserUsageInputs {
	repos := []string{"acme/web", "acme/web", "acme/web", "acme/api", "acme/api", "acme/mobile", "acme/infra", "acme/docs", "acme/web", ""}
	var in browserUsageInputs
	for i, e := range events {
		if e.Kind != agent.EventCreated {
			continue
		}
		repo, workflow := repos[i%len(repos)], "CI"
		if repo == "" {
			workflow = ""
		}
		r := usageRec(e.Pod, repo, workflow, e.At.Sub(t0).Seconds(), e.At.Sub(t0).Seconds()+12)
		// The agents saw the runner exit half a second before the record's end.
		in.exits = append(in.exits, agent.Event{Pod: e.Pod, Kind: agent.EventExited, At: r.EndedAt.Add(-500 * time.Millisecond)})
		if repo != "" {
			q := float64(i%7) / 2
			r.QueueSeconds = &q
		}
		in.records = append(in.records, r)
	}
	in.events = len(in.records)
	return in
}

// browserUsageInputs are a report's usage inputs and the agents' exits they imply.
type browserUsageInputs struct {
	usageInputs
	exits []agent.Event
}

// TestReportRendersInChromium opens report.html in headless Chromium: it must render
// its five charts (queued and runners over time, the pickup distribution, Gantry's and
// the floor's timelines, who used the pool) with no console error, exception or failed
// load, and its screenshot must show Gantry's and the floor's colors and the usage
// chart's. GANTRY_REPORT_SCREENSHOT=FILE keeps the screenshot.
func TestReportRendersInChromium(t *testing.T) {
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH (set GANTRY_CHROMIUM, or on Debian `apt-get install chromium`): the report's browser test is skipped")
	}
	dir := t.TempDir()
	if err := browserReport().write(dir); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1100, 900),
		chromedp.UserDataDir(chromiumProfile(t)))
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	defer func() {
		// Close the browser and wait for it before the profile is removed.
		if err := chromedp.Cancel(ctx); err != nil {
			t.Logf("closing Chromium: %v", err)
		}
	}()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute) // a loaded machine starts Chromium slowly
	defer cancelTimeout()

	var mu sync.Mutex
	var problems []string
	chromedp.ListenTarget(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError || e.Type == runtime.APITypeWarning || e.Type == runtime.APITypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value))
				}
				problems = append(problems, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Error())
		case *log.EventEntryAdded:
			if e.Entry.Level == log.LevelError || e.Entry.Level == log.LevelWarning {
				problems = append(problems, fmt.Sprintf("log %s (%s): %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		}
	})
	var png []byte
	var charts int
	var text string
	err := chromedp.Run(ctx,
		log.Enable(), runtime.Enable(),
		chromedp.Navigate("file://"+filepath.Join(dir, "report.html")),
		chromedp.WaitVisible("svg", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("svg").length`, &charts),
		chromedp.Evaluate(`document.body.innerText`, &text),
		chromedp.FullScreenshot(&png, 100),
	)
	if err != nil {
		t.Fatalf("rendering report.html in %s: %v", bin, err)
	}
	if path := os.Getenv("GANTRY_REPORT_SCREENSHOT"); path != "" {
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Error(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("the page reported: %s", p)
	}
	if charts != 5 {
		t.Errorf("%d charts rendered, want 5", charts)
	}
	for _, want := range []string{"Gantry beside the floor", "pickup latency distribution", "per-job timeline: Gantry", "per-job timeline: floor",
		"Who used the pool", "who used the pool: runner pods alive by repository", "acme/web", "no job (runners idle, retired or failed before one)",
		"The records differ from it by +4.35 %.",
		"pickup latency: job queued → started by a runner (s)", "jobs picked up (%)", "Targets", "MISSED",
		"Watchers the kube-apiserver cut for falling behind (a control plane short of CPU): 51 during Gantry's run, 3 during the floor's.",
		"Controller CPU per job: Gantry's 12.8 ms, the floor's 0.40 ms (the oracle's own process, start-up included), ratio 32.00."} {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	checkColors(t, png)
}

// chromiumProfile is a profile directory for one Chromium run. Chromium's helper
// processes (crashpad, the zygote) can still write into it for a moment after the
// browser has exited, so it is removed with retries, and a leftover is logged rather
// than failing the test as t.TempDir's cleanup would.
func chromiumProfile(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gantry-chromium-profile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var err error
		for range 50 {
			if err = os.RemoveAll(dir); err == nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("leaving Chromium's profile %s behind: %v", dir, err)
	})
	return dir
}

// checkColors decodes the screenshot and counts the pixels of Gantry's line
// (#337ab7) and the floor's (#888888): both charts must have been painted.
func checkColors(t *testing.T, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	count := map[[3]uint32]int{}
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			count[[3]uint32{r >> 8, g >> 8, b >> 8}]++
		}
	}
	gantry, floor := count[[3]uint32{0x33, 0x7a, 0xb7}], count[[3]uint32{0x88, 0x88, 0x88}]
	if gantry < 200 || floor < 100 {
		t.Errorf("screenshot %dx%d has %d pixels of Gantry's color and %d of the floor's: the charts were not painted",
			bounds.Dx(), bounds.Dy(), gantry, floor)
	}
	// The usage chart's busiest repository (a0) and its runners without a job (an).
	if top, none := count[[3]uint32{0x4e, 0x79, 0xa7}], count[[3]uint32{0xd7, 0xdd, 0xe3}]; top < 2000 || none < 100 {
		t.Errorf("screenshot has %d pixels of the busiest repository's color and %d of the runners without a job: the usage chart was not painted", top, none)
	}
	if bounds.Dy() < 1500 {
		t.Errorf("screenshot is %d pixels high: the page is shorter than its charts", bounds.Dy())
	}
}
