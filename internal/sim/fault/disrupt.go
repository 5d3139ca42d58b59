package fault

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Disruptions of nodes and pods under the runners: voluntary ones through the eviction
// API, which PodDisruptionBudgets hold (drain, consolidate), and involuntary ones, which
// nothing holds (spot_reclaim, kubelet_eviction), beside the job's own failure
// (oom_kill). internal/sim/cluster plays each as Kubernetes does.
const (
	KindDrain           = "drain"
	KindConsolidate     = "consolidate"
	KindSpotReclaim     = "spot_reclaim"
	KindKubeletEviction = "kubelet_eviction"
	KindOOMKill         = "oom_kill"
)

// Node picks of the disruption steps that name no node.
const (
	// PickBusy: the Ready node running the most jobs (the most runner pods among equals).
	PickBusy = "busy"
	// PickIdle: a Ready node with runner pods of which none runs a job (else the one
	// running the fewest jobs).
	PickIdle = "idle"
	// PickUnderused: the Ready node with the fewest runner pods, at least one: the node a
	// consolidating autoscaler empties.
	PickUnderused = "underused"
)

// What a drained node becomes (Drain.Then).
const (
	ThenCordoned = ""         // left cordoned, as kubectl drain leaves it
	ThenUncordon = "uncordon" // back in service, as after an upgrade in place
	ThenDelete   = "delete"   // removed, as an autoscaler removes the node it emptied
)

// Drain drains a node as `kubectl drain --ignore-daemonsets --delete-emptydir-data`
// does: cordon, then evict every pod through the eviction API, retrying the evictions a
// PodDisruptionBudget refuses. The step starts the drain and lets it run: the
// injection ends when the drain does. A consolidate step is a drain of the underused
// node, then removed, as cluster-autoscaler's scale-down and Karpenter's consolidation
// drain a node through the eviction API.
type Drain struct {
	// Node names the node; empty: Pick chooses one.
	Node string `json:"node,omitempty"`
	// Pick is busy (drain's default), idle or underused (consolidate's default).
	Pick string `json:"pick,omitempty"`
	// Timeout bounds the drain (kubectl drain --timeout; default 15m).
	Timeout simgithub.Duration `json:"timeout,omitempty"`
	// GracePeriod overrides the pods' terminationGracePeriodSeconds (--grace-period).
	GracePeriod *simgithub.Duration `json:"grace_period,omitempty"`
	// Then is what the node becomes once drained: "" (left cordoned), uncordon or
	// delete (consolidate's default).
	Then string `json:"then,omitempty"`
}

// SpotReclaim takes a spot node away at once: the machine, the Node and its pods.
type SpotReclaim struct {
	// Node names the node; empty: Pick chooses one (default busy).
	Node string `json:"node,omitempty"`
	Pick string `json:"pick,omitempty"`
}

// PodKill kills runner pods that run a job: a kubelet's node-pressure eviction
// (kubelet_eviction) or the OOM killer ending the runner container (oom_kill).
type PodKill struct {
	// Count is how many busy runner pods (default 1), the longest-running first.
	Count int `json:"count,omitempty"`
	// Resource is the kubelet eviction's resource under pressure (default memory).
	Resource string `json:"resource,omitempty"`
}

// DrainResult is what a drain did.
type DrainResult struct {
	PodsOnNode, BusyPodsOnNode int
	// WaitedFor are the pods a disruption budget held, by name.
	WaitedFor []string
	TimedOut  bool
}

// KilledPod is a runner pod a step killed, and the job its runner was running.
type KilledPod struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
	Job  int64  `json:"job,omitempty"`
}

// Disruptions are the cluster's disruptions, with the runners on its nodes.
type Disruptions interface {
	// PickNode names the node a step that names none disrupts (Pick…).
	PickNode(ctx context.Context, pick string) (string, error)
	// Drain drains node (consolidation tells a consolidate step's) and then does
	// with it what d.Then says.
	Drain(ctx context.Context, node string, d Drain, consolidation bool) (DrainResult, error)
	// SpotReclaim takes node away at once, with its pods and the runners on them.
	SpotReclaim(ctx context.Context, node string) (pods, busy int, err error)
	// KillPods kills up to n busy runner pods as kind (kubelet_eviction or oom_kill)
	// says.
	KillPods(ctx context.Context, kind string, n int, resource string) ([]KilledPod, error)
}

// disruptionKinds are the disruption kinds the step sets.
func (s Step) disruptionKinds() []string {
	var kinds []string
	if s.Drain != nil {
		kinds = append(kinds, KindDrain)
	}
	if s.Consolidate != nil {
		kinds = append(kinds, KindConsolidate)
	}
	if s.SpotReclaim != nil {
		kinds = append(kinds, KindSpotReclaim)
	}
	if s.KubeletEviction != nil {
		kinds = append(kinds, KindKubeletEviction)
	}
	if s.OOMKill != nil {
		kinds = append(kinds, KindOOMKill)
	}
	return kinds
}

// isDisruption reports whether kind is one of this file's.
func isDisruption(kind string) bool {
	switch kind {
	case KindDrain, KindConsolidate, KindSpotReclaim, KindKubeletEviction, KindOOMKill:
		return true
	}
	return false
}

// validateDisruption checks a disruption step.
func validateDisruption(st Step, bad func(format string, args ...any)) {
	if st.For != 0 {
		bad("%s starts at its time and takes no for", st.Kind())
	}
	pick := func(p string, allowed ...string) {
		if p != "" && !containsStr(allowed, p) {
			bad("pick must be one of %s, got %q", strings.Join(allowed, ", "), p)
		}
	}
	switch st.Kind() {
	case KindDrain, KindConsolidate:
		d := st.Drain
		if d == nil {
			d = st.Consolidate
		}
		pick(d.Pick, PickBusy, PickIdle, PickUnderused)
		if d.Timeout < 0 || (d.GracePeriod != nil && *d.GracePeriod < 0) {
			bad("timeout and grace_period must not be negative")
		}
		switch d.Then {
		case ThenCordoned, ThenUncordon, ThenDelete:
		default:
			bad("then must be uncordon or delete (or empty: left cordoned), got %q", d.Then)
		}
	case KindSpotReclaim:
		pick(st.SpotReclaim.Pick, PickBusy, PickIdle, PickUnderused)
	case KindKubeletEviction, KindOOMKill:
		pk := st.KubeletEviction
		if pk == nil {
			pk = st.OOMKill
		}
		if pk.Count < 0 {
			bad("count must not be negative")
		}
		if st.OOMKill != nil && pk.Resource != "" {
			bad("oom_kill takes no resource")
		}
	}
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// drainDefaults are a drain step's settings with their defaults.
func (s Step) drainDefaults() (Drain, bool) {
	if s.Consolidate != nil {
		d := *s.Consolidate
		if d.Pick == "" {
			d.Pick = PickUnderused
		}
		if d.Then == "" {
			d.Then = ThenDelete
		}
		if d.Timeout == 0 {
			d.Timeout = simgithub.Duration(15 * time.Minute)
		}
		return d, true
	}
	d := *s.Drain
	if d.Pick == "" {
		d.Pick = PickBusy
	}
	if d.Timeout == 0 {
		d.Timeout = simgithub.Duration(15 * time.Minute)
	}
	return d, false
}

// disrupter plays the disruption steps of one Run: drains in the background (until
// they end, or Run's context does), the others at once.
type disrupter struct {
	t    Disruptions
	logf func(format string, args ...any)
	mu   sync.Mutex // guards the injections the drains fill in
	wg   sync.WaitGroup
}

// play injects st into in; a drain goes on in the background and ends the injection
// when it ends.
func (d *disrupter) play(ctx context.Context, st Step, in *Injection, since func() float64) error {
	if d.t == nil {
		return errors.New("no cluster to disrupt")
	}
	kind := st.Kind()
	switch kind {
	case KindDrain, KindConsolidate:
		dr, consolidation := st.drainDefaults()
		node := dr.Node
		if node == "" {
			n, err := d.t.PickNode(ctx, dr.Pick)
			if err != nil {
				return fmt.Errorf("choosing a node: %w", err)
			}
			node = n
		}
		d.mu.Lock()
		in.Injected, in.Node = true, node
		in.Detail = fmt.Sprintf("draining node %s (%s)", node, describeThen(dr.Then))
		d.mu.Unlock()
		d.logf("%s: %s", in.Name, in.Detail)
		d.wg.Go(func() {
			res, err := d.t.Drain(ctx, node, dr, consolidation)
			d.mu.Lock()
			defer d.mu.Unlock()
			in.EndSeconds = since()
			in.PodsOnNode, in.BusyPodsOnNode, in.WaitedFor, in.TimedOut = res.PodsOnNode, res.BusyPodsOnNode, res.WaitedFor, res.TimedOut
			in.Detail = fmt.Sprintf("node %s drained in %.1fs: %d runner pods, %d running a job, %d waited for", node,
				in.EndSeconds-in.StartSeconds, res.PodsOnNode, res.BusyPodsOnNode, len(res.WaitedFor))
			if err != nil {
				in.Error = err.Error()
				in.Detail = fmt.Sprintf("drain of node %s ended after %.1fs: %v", node, in.EndSeconds-in.StartSeconds, err)
			}
			d.logf("%s ended: %s", in.Name, in.Detail)
		})
		return nil
	case KindSpotReclaim:
		sr := st.SpotReclaim
		node := sr.Node
		if node == "" {
			pick := sr.Pick
			if pick == "" {
				pick = PickBusy
			}
			n, err := d.t.PickNode(ctx, pick)
			if err != nil {
				return fmt.Errorf("choosing a node: %w", err)
			}
			node = n
		}
		pods, busy, err := d.t.SpotReclaim(ctx, node)
		if err != nil {
			return fmt.Errorf("reclaiming node %s: %w", node, err)
		}
		in.Injected, in.Node, in.PodsOnNode, in.BusyPodsOnNode = true, node, pods, busy
		in.Detail = fmt.Sprintf("spot node %s reclaimed with %d runner pods, %d running a job", node, pods, busy)
	default:
		pk := st.KubeletEviction
		if pk == nil {
			pk = st.OOMKill
		}
		n := max(pk.Count, 1)
		resource := pk.Resource
		if kind == KindKubeletEviction && resource == "" {
			resource = "memory"
		}
		killed, err := d.t.KillPods(ctx, kind, n, resource)
		if err != nil {
			return err
		}
		in.Injected, in.Pods = true, killed
		what := "evicted by the kubelet (" + resource + " pressure)"
		if kind == KindOOMKill {
			what = "OOM-killed"
		}
		in.Detail = fmt.Sprintf("%d of %d busy runner pods %s", len(killed), n, what)
	}
	d.logf("%s: %s", in.Name, in.Detail)
	return nil
}

func describeThen(then string) string {
	switch then {
	case ThenUncordon:
		return "uncordoned once drained"
	case ThenDelete:
		return "deleted once drained"
	}
	return "left cordoned"
}
