package runnerpool

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// platformRecheck is how often the nodes are read again for a pool that has seen none it
// can run on (status.platform Default). The read is from the shared view (no request),
// but the choice follows nodes only at this pace, never as each node comes and goes.
const platformRecheck = time.Minute

// maxPlatformMessage is status.platform.message's MaxLength.
const maxPlatformMessage = 1024

// platformReads remembers when each pool last read the nodes, and the platform this
// process last logged for it.
type platformReads struct {
	mu     sync.Mutex
	last   map[types.NamespacedName]time.Time
	logged map[types.NamespacedName]string
}

func (p *platformReads) due(key types.NamespacedName, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[key]
	return !ok || now.Sub(last) >= platformRecheck
}

func (p *platformReads) read(key types.NamespacedName, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[types.NamespacedName]time.Time{}
	}
	p.last[key] = now
}

// announce reports whether platform ("os/arch") is news for the pool's log: not what
// this process logged for it last. The passes before the pool's first status write
// (which may wait for its session) each choose the platform again from a stored status
// without one; the log says so once.
func (p *platformReads) announce(key types.NamespacedName, platform string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.logged[key] == platform {
		return false
	}
	if p.logged == nil {
		p.logged = map[types.NamespacedName]string{}
	}
	p.logged[key] = platform
	return true
}

func (p *platformReads) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, key)
	delete(p.logged, key)
}

// platform records in status.platform the OS and architecture the pool's runner pods are
// pinned to and register as labels. What the template pins is taken as it is; what it
// leaves open is read from the Ready nodes its pods can be scheduled on (choosePlatform).
// Contract: the nodes are read (from the shared view, nodes.View: no request) only when
// the template leaves something open and status.platform is missing, was chosen for
// another generation of the spec, or is Default and was read more than platformRecheck
// ago — not as nodes come and go, so a node group scaled to zero does not change the labels. When
// the platform changes, no runner is created in this pass (st.platformChanged): the
// Runner controller reads the platform from the stored status, which is written at the
// end of the pass; the pool is requeued as soon as it is written (writeStatus), not
// before: a first status that waits for the pool's session (sessionSettle) must not
// bring the pool back every few milliseconds to read the nodes again.
func (r *Reconciler) platform(ctx context.Context, st *state) (reconcile.Result, error) {
	pool := st.pool
	key := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}
	now := r.Clock.Now()
	cur := pool.Status.Platform
	var next v1alpha1.PlatformStatus
	var res reconcile.Result
	switch os, arch := pool.Spec.TemplatePlatform(); {
	case os != "" && arch != "":
		next = choosePlatform(pool, nil)
	case cur != nil && cur.Source == v1alpha1.PlatformFromNodes && cur.ObservedGeneration == pool.Generation:
		return reconcile.Result{}, nil
	case cur != nil && cur.Source == v1alpha1.PlatformDefault && cur.ObservedGeneration == pool.Generation && !r.platformReads.due(key, now):
		return reconcile.Result{RequeueAfter: platformRecheck}, nil
	default:
		if nodes, err := r.Nodes.List(ctx); err != nil {
			// Without the nodes the platform stays as it was (or the default); the pool
			// works on.
			r.platformReads.read(key, now)
			if cur != nil {
				log.FromContext(ctx).V(1).Info("Listing nodes to choose the runners' platform failed; keeping the one chosen", "reason", err.Error())
				next = *cur
			} else {
				log.FromContext(ctx).Info("Listing nodes to choose the runners' platform failed", "reason", err.Error())
				next = choosePlatform(pool, nil)
				next.Message += fmt.Sprintf(" (the nodes could not be listed: %v)", err)
			}
		} else {
			r.platformReads.read(key, now)
			next = choosePlatform(pool, nodes)
		}
		if next.Source == v1alpha1.PlatformDefault {
			res.RequeueAfter = platformRecheck
		}
	}
	next.ObservedGeneration = pool.Generation
	if len(next.Message) > maxPlatformMessage {
		next.Message = next.Message[:maxPlatformMessage-len("…")] + "…"
	}
	if equality.Semantic.DeepEqual(cur, &next) {
		return res, nil
	}
	if cur == nil || cur.OS != next.OS || cur.Arch != next.Arch {
		if r.platformReads.announce(key, next.OS+"/"+next.Arch) {
			log.FromContext(ctx).Info("Runner platform chosen", "os", next.OS, "arch", next.Arch, "source", next.Source, "why", next.Message)
		}
		st.platformChanged = true
	}
	pool.Status.Platform = &next
	return res, nil
}

// choosePlatform returns the OS and architecture for the pool's runner pods. What the
// template pins (TemplatePlatform) stands. What it leaves open is read from the nodes its
// pods can be scheduled on (Ready, not cordoned, matching the template's nodeSelector and
// required node affinity, their NoSchedule and NoExecute taints tolerated) and of an OS
// and architecture the runner runs on: the one they all share; among several, linux and
// amd64 where such nodes are (jobs written for GitHub's hosted runners expect x64, and
// the choice does not swing with node counts), else the most common; with no such node,
// linux and amd64 (Default). The message says which and why.
func choosePlatform(pool *v1alpha1.RunnerPool, nodes []corev1.Node) v1alpha1.PlatformStatus {
	os, arch := pool.Spec.TemplatePlatform()
	if os != "" && arch != "" {
		return v1alpha1.PlatformStatus{OS: os, Arch: arch, Source: v1alpha1.PlatformFromTemplate,
			Message: fmt.Sprintf("the template pins %s/%s", os, arch)}
	}
	candidates := schedulableNodes(pool, os, arch, nodes)
	osNote := ""
	if os == "" {
		oses := countLabel(candidates, v1alpha1.NodeLabelOS, v1alpha1.RunnerOSLabel)
		os = pick(oses, v1alpha1.DefaultNodeOS)
		if len(oses) > 1 {
			osNote = fmt.Sprintf("; they run several operating systems (%s): %s chosen, set template.spec.nodeSelector %s to choose",
				counts(oses), os, v1alpha1.NodeLabelOS)
		}
	}
	candidates = slices.DeleteFunc(candidates, func(n *corev1.Node) bool { return n.Labels[v1alpha1.NodeLabelOS] != os })
	archs := countLabel(candidates, v1alpha1.NodeLabelArch, v1alpha1.RunnerArchLabel)
	if arch != "" {
		archs = map[string]int{arch: len(candidates)}
	}
	if len(archs) == 0 || len(candidates) == 0 {
		if arch == "" {
			arch = v1alpha1.DefaultNodeArch
		}
		return v1alpha1.PlatformStatus{OS: os, Arch: arch, Source: v1alpha1.PlatformDefault, Message: fmt.Sprintf(
			"no Ready node the pool's pods can be scheduled on was seen, so %s/%s is assumed and the nodes are read again every minute;"+
				" set template.spec.nodeSelector %s to choose", os, arch, v1alpha1.NodeLabelArch)}
	}
	if arch == "" {
		arch = pick(archs, v1alpha1.DefaultNodeArch)
	}
	msg := fmt.Sprintf("the %d Ready node(s) the pool's pods can be scheduled on are %s/%s", archs[arch], os, arch)
	if len(archs) > 1 {
		msg = fmt.Sprintf("the Ready %s nodes the pool's pods can be scheduled on are of several architectures (%s): %s chosen;"+
			" set template.spec.nodeSelector %s to choose", os, counts(archs), arch, v1alpha1.NodeLabelArch)
	}
	return v1alpha1.PlatformStatus{OS: os, Arch: arch, Source: v1alpha1.PlatformFromNodes, Message: msg + osNote}
}

// schedulableNodes returns the nodes a pod of the pool's template can be scheduled on,
// the OS and architecture the template pins (os, arch: "" when open) included.
func schedulableNodes(pool *v1alpha1.RunnerPool, os, arch string, nodes []corev1.Node) []*corev1.Node {
	pod := &corev1.Pod{Spec: *pool.Spec.Template.Spec.DeepCopy()}
	sel := map[string]string{}
	for k, v := range pod.Spec.NodeSelector {
		sel[k] = v
	}
	if os != "" {
		sel[v1alpha1.NodeLabelOS] = os
	}
	if arch != "" {
		sel[v1alpha1.NodeLabelArch] = arch
	}
	pod.Spec.NodeSelector = sel
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	blocking := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	var out []*corev1.Node
	for i := range nodes {
		n := &nodes[i]
		if n.Spec.Unschedulable || !nodeReady(n) {
			continue
		}
		if ok, err := affinity.Match(n); err != nil || !ok {
			continue
		}
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, pod.Spec.Tolerations, blocking, false); untolerated {
			continue
		}
		out = append(out, n)
	}
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// countLabel counts the nodes by the value of a label, only values GitHub has a runner
// label for (label(v) != "").
func countLabel(nodes []*corev1.Node, key string, label func(string) string) map[string]int {
	out := map[string]int{}
	for _, n := range nodes {
		if v := n.Labels[key]; label(v) != "" {
			out[v]++
		}
	}
	return out
}

// pick returns the one value counted; among several, preferred if counted, else the
// most common (the first by name on a tie); with none, preferred.
func pick(counted map[string]int, preferred string) string {
	if len(counted) == 0 || counted[preferred] > 0 {
		return preferred
	}
	best := ""
	for _, v := range sortedKeys(counted) {
		if best == "" || counted[v] > counted[best] {
			best = v
		}
	}
	return best
}

func counts(counted map[string]int) string {
	parts := make([]string, 0, len(counted))
	for _, v := range sortedKeys(counted) {
		parts = append(parts, fmt.Sprintf("%s: %d", v, counted[v]))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
