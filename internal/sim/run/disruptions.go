package run

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	"github.com/gantry-dev/gantry/internal/sim/fault"
)

// disruptor is the fault schedule's Disruptions on the simulated cluster: each
// disruption played by the cluster (as Kubernetes does it) and the runner agents (the
// runner processes it kills), and recorded as it happened — the cluster's own record,
// which the report reads beside GitHub's and the agents'.
type disruptor struct {
	cl     *cluster.Cluster
	agents *agent.Agents

	mu       sync.Mutex
	drains   []drainRecord
	reclaims []reclaimRecord
	kills    []podKillRecord
}

// drainRecord is a drain or a consolidation, and the runners busy on its node when
// it started.
type drainRecord struct {
	cluster.DrainRecord
	Consolidation bool
	Then          string
	// RunnerPods were the runner pods on the node; Busy those running a job (pod →
	// job) when the drain started.
	RunnerPods []string
	Busy       map[string]int64
}

// reclaimRecord is a spot node reclaimed: when, and its runner pods and busy ones.
type reclaimRecord struct {
	Node string
	At   time.Time
	Pods []string
	Busy map[string]int64
}

// podKillRecord is a runner pod a kubelet eviction or the OOM killer killed.
type podKillRecord struct {
	Kind, Pod, Node string
	Job             int64
	At              time.Time
}

func newDisruptor(cl *cluster.Cluster, agents *agent.Agents) *disruptor {
	return &disruptor{cl: cl, agents: agents}
}

// runnerPods are the Running runner pods not being deleted, by node.
func (d *disruptor) runnerPods(ctx context.Context) (map[string][]string, error) {
	var pods corev1.PodList
	if err := d.cl.Client.List(ctx, &pods, client.InNamespace(namespace),
		client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p.Name)
		}
	}
	return out, nil
}

// PickNode chooses among the Ready, schedulable nodes that run runner pods.
func (d *disruptor) PickNode(ctx context.Context, pick string) (string, error) {
	var nodes corev1.NodeList
	if err := d.cl.Client.List(ctx, &nodes); err != nil {
		return "", err
	}
	byNode, err := d.runnerPods(ctx)
	if err != nil {
		return "", err
	}
	busy := d.agents.Busy()
	type cand struct {
		name       string
		pods, jobs int
	}
	var cands []cand
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable || !nodeIsReady(&n) || len(byNode[n.Name]) == 0 {
			continue
		}
		c := cand{name: n.Name, pods: len(byNode[n.Name])}
		for _, p := range byNode[n.Name] {
			if busy[p] != 0 {
				c.jobs++
			}
		}
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		return "", errors.New("no Ready, schedulable node runs a runner pod")
	}
	less := map[string]func(a, b cand) bool{
		fault.PickBusy: func(a, b cand) bool { return a.jobs > b.jobs || (a.jobs == b.jobs && a.pods > b.pods) },
		fault.PickIdle: func(a, b cand) bool { return a.jobs < b.jobs || (a.jobs == b.jobs && a.pods > b.pods) },
		fault.PickUnderused: func(a, b cand) bool {
			return a.pods < b.pods || (a.pods == b.pods && a.jobs < b.jobs)
		},
	}[pick]
	if less == nil {
		return "", fmt.Errorf("unknown pick %q", pick)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if less(cands[i], cands[j]) {
			return true
		}
		if less(cands[j], cands[i]) {
			return false
		}
		return cands[i].name < cands[j].name
	})
	return cands[0].name, nil
}

func nodeIsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Drain drains node with the cluster's kubectl-drain algorithm, then uncordons or
// deletes it as dr.Then says.
func (d *disruptor) Drain(ctx context.Context, node string, dr fault.Drain, consolidation bool) (fault.DrainResult, error) {
	byNode, err := d.runnerPods(ctx)
	if err != nil {
		return fault.DrainResult{}, err
	}
	busy := map[string]int64{}
	all := d.agents.Busy()
	for _, p := range byNode[node] {
		if job := all[p]; job != 0 {
			busy[p] = job
		}
	}
	opts := cluster.DrainOptions{Timeout: time.Duration(dr.Timeout)}
	if dr.GracePeriod != nil {
		g := time.Duration(*dr.GracePeriod)
		opts.GracePeriod = &g
	}
	rec, derr := d.cl.Drain(ctx, node, opts)
	switch {
	case derr != nil:
	case dr.Then == fault.ThenUncordon:
		derr = d.cl.Cordon(ctx, node, false)
	case dr.Then == fault.ThenDelete:
		// The machine goes: no runner starts there again.
		d.agents.LoseNode(node)
		derr = d.cl.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		if apierrors.IsNotFound(derr) {
			derr = nil
		}
	}
	runners := slices.Clone(byNode[node])
	d.mu.Lock()
	d.drains = append(d.drains, drainRecord{DrainRecord: rec, Consolidation: consolidation, Then: dr.Then, RunnerPods: runners, Busy: busy})
	d.mu.Unlock()
	res := fault.DrainResult{PodsOnNode: len(runners), BusyPodsOnNode: len(busy), TimedOut: rec.TimedOut}
	for _, p := range rec.WaitedFor() {
		if slices.Contains(runners, p) {
			res.WaitedFor = append(res.WaitedFor, p)
		}
	}
	return res, derr
}

// SpotReclaim takes node away: its runner processes die with the machine, then the
// cluster deletes the node and its pods.
func (d *disruptor) SpotReclaim(ctx context.Context, node string) (pods, busy int, err error) {
	all := d.agents.Busy()
	byNode, err := d.runnerPods(ctx)
	if err != nil {
		return 0, 0, err
	}
	rec := reclaimRecord{Node: node, At: time.Now(), Pods: byNode[node], Busy: map[string]int64{}}
	for _, p := range rec.Pods {
		if job := all[p]; job != 0 {
			rec.Busy[p] = job
		}
	}
	d.agents.LoseNode(node)
	_, err = d.cl.SpotReclaim(ctx, node)
	d.mu.Lock()
	d.reclaims = append(d.reclaims, rec)
	d.mu.Unlock()
	return len(rec.Pods), len(rec.Busy), err
}

// KillPods kills up to n runner pods running a job, the oldest jobs first: the runner
// process dies at once (SIGKILL), then the cluster writes what the kubelet reports.
func (d *disruptor) KillPods(ctx context.Context, kind string, n int, resource string) ([]fault.KilledPod, error) {
	busy := d.agents.Busy()
	pods := make([]string, 0, len(busy))
	for p := range busy {
		pods = append(pods, p)
	}
	sort.Slice(pods, func(i, j int) bool { return busy[pods[i]] < busy[pods[j]] })
	cause := agent.CauseEvicted
	if kind == fault.KindOOMKill {
		cause = agent.CauseOOMKilled
	}
	var out []fault.KilledPod
	var errs []error
	for _, name := range pods {
		if len(out) == n {
			break
		}
		key := client.ObjectKey{Namespace: namespace, Name: name}
		p := &corev1.Pod{}
		if err := d.cl.Client.Get(ctx, key, p); err != nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		job, ok := d.agents.Kill(name, cause)
		if !ok || job == 0 {
			continue
		}
		var err error
		if kind == fault.KindOOMKill {
			err = d.cl.OOMKill(ctx, key, v1alpha1.RunnerContainerName)
		} else {
			err = d.cl.EvictByKubelet(ctx, key, corev1.ResourceName(resource))
		}
		if err != nil {
			errs = append(errs, err)
		}
		out = append(out, fault.KilledPod{Pod: name, Node: p.Spec.NodeName, Job: job})
		d.mu.Lock()
		d.kills = append(d.kills, podKillRecord{Kind: kind, Pod: name, Node: p.Spec.NodeName, Job: job, At: time.Now()})
		d.mu.Unlock()
	}
	return out, errors.Join(errs...)
}

// records returns what the disruptions did, for the report.
func (d *disruptor) records() (drains []drainRecord, reclaims []reclaimRecord, kills []podKillRecord) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.drains), slices.Clone(d.reclaims), slices.Clone(d.kills)
}
