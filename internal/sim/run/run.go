package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

const (
	namespace       = "ci"
	systemNamespace = "gantry-system"
	poolName        = "linux"
	org             = "acme"
	simToken        = "ghp_gantrysimulatedtoken000000000000000"
	hookSecret      = "gantry-sim-webhook-secret"
)

// Options configure a run.
type Options struct {
	// BinDir holds the control-plane binaries (hack/k8s-bins.sh --print).
	BinDir string
	// OutDir receives report.json, report.html and the processes' logs.
	OutDir string
	// Gantry is the gantry binary to run as the controller (default: this executable).
	Gantry string
	// Controller, when set, is run as the controller instead of Gantry: another build
	// measured on the same scenario. The floor's oracle stays Gantry's.
	Controller string
	// GantryEnv is added to the controller's environment.
	GantryEnv []string
	// Out receives progress and the live view.
	Out io.Writer
	// Seed makes Poisson arrivals reproducible.
	Seed uint64
	// NoFloor skips the floor: the oracle's run of a burst or steady workload after
	// Gantry's.
	NoFloor bool
}

// Run runs a scenario end to end and returns its report (also written to OutDir):
// the world is set up, Gantry serves the workload, then — for a burst or steady
// workload — the oracle serves it again for the floor, and the report is written.
func Run(ctx context.Context, sc Scenario, opts Options) (*Report, error) {
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	// The live view, the fault schedule and the setup all write progress.
	opts.Out = &syncWriter{w: opts.Out}
	if opts.Gantry == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Gantry = exe
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	host := hostNow()

	w, err := startWorld(ctx, sc, opts)
	if err != nil {
		return nil, err
	}
	defer w.stop()
	in, err := runGantry(ctx, w, sc, opts.Seed, opts.Out)
	if err != nil {
		return nil, err
	}
	in.host, in.hostEnd = host, hostNow()
	var fr floorRun
	var floorErr error
	withFloor := sc.hasFloor() && !opts.NoFloor
	if withFloor {
		fr, floorErr = runFloor(ctx, w.floorEnv(opts), sc.workload(), opts.Seed, sc.Timeout, opts.Out)
	}
	w.stopAgents()
	apiLog := w.cl.APIServerLog()
	// Stopped now, the kube-apiserver has written its whole log.
	w.stop()

	rep := buildReport(sc, in)
	if withFloor {
		rep.Floor = floorReport(fr, floorErr, rep)
	}
	rep.countWatchersCut(apiLog, in.start, in.end, fr.start, fr.end)
	for _, e := range w.agents.Errors() {
		rep.AgentErrors = append(rep.AgentErrors, e.Error())
	}
	if err := rep.write(opts.OutDir); err != nil {
		return rep, err
	}
	return rep, nil
}

// syncWriter serializes writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// errNotStarted is returned by the controller's Kill when no process runs.
var errNotStarted = errors.New("no controller process is running")
