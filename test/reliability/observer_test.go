package reliability

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/manager"
)

// observer watches a namespace's Runners and pods for the whole scenario, so that
// objects that lived a moment are counted too.
type observer struct {
	mu sync.Mutex
	// runners: first seen, by name.
	runners map[string]time.Time
	// failed: reason, by runner name.
	failed map[string]string
	// pods: the UIDs of the pods seen per runner name.
	pods map[string]map[types.UID]bool
	// jit: the distinct JIT configurations handed to each runner's pod.
	jit map[string]map[string]bool
	// jobs: the jobs each runner's agent started.
	jobs map[string][]int64
	// alive and peak: Runners neither failed nor deleted, now and at most.
	alive map[string]bool
	peak  int
}

// newObserver watches the namespace. Every value of every Secret in it becomes a
// needle of the secret scan — the JIT configurations of runners that never started
// included.
func newObserver(t *testing.T, ns string, secrets *needles) *observer {
	t.Helper()
	o := &observer{
		runners: map[string]time.Time{}, failed: map[string]string{},
		pods: map[string]map[types.UID]bool{}, jit: map[string]map[string]bool{},
		jobs: map[string][]int64{}, alive: map[string]bool{},
	}
	c, err := cache.New(cp.cfg, cache.Options{Scheme: manager.Scheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ri, err := c.GetInformer(ctx, &v1alpha1.Runner{})
	if err != nil {
		t.Fatal(err)
	}
	pi, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ri.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.runner(obj) },
		UpdateFunc: func(_, obj any) { o.runner(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if r, ok := obj.(*v1alpha1.Runner); ok {
				o.mu.Lock()
				delete(o.alive, r.Name)
				o.mu.Unlock()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pi.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { o.pod(obj) }, UpdateFunc: func(_, obj any) { o.pod(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	si, err := c.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		t.Fatal(err)
	}
	addSecret := func(obj any) {
		if sec, ok := obj.(*corev1.Secret); ok {
			for k, v := range sec.Data {
				secrets.add("Secret "+sec.Name+" key "+k, string(v))
			}
		}
	}
	if _, err := si.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: addSecret, UpdateFunc: func(_, obj any) { addSecret(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("observer cache did not sync")
	}
	t.Cleanup(cancel)
	return o
}

func (o *observer) runner(obj any) {
	r, ok := obj.(*v1alpha1.Runner)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, seen := o.runners[r.Name]; !seen {
		o.runners[r.Name] = time.Now()
	}
	if r.Status.Phase == v1alpha1.RunnerFailed {
		o.failed[r.Name] = r.Status.Reason
	}
	if r.Status.Phase == v1alpha1.RunnerFailed || !r.DeletionTimestamp.IsZero() {
		delete(o.alive, r.Name)
	} else {
		o.alive[r.Name] = true
	}
	o.peak = max(o.peak, len(o.alive))
}

func (o *observer) pod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	name := p.Labels[v1alpha1.LabelRunner]
	if name == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pods[name] == nil {
		o.pods[name] = map[types.UID]bool{}
	}
	o.pods[name][p.UID] = true
}

func (o *observer) jitConfig(runner, enc string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.jit[runner] == nil {
		o.jit[runner] = map[string]bool{}
	}
	o.jit[runner][enc] = true
}

func (o *observer) ran(runner string, job int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.jobs[runner] = append(o.jobs[runner], job)
}

// duplicates counts what must never happen: a second pod for a Runner, a second
// registration (JIT configuration) for a Runner, a runner that started two jobs.
func (o *observer) duplicates() (pods, registrations, jobs int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, uids := range o.pods {
		pods += max(0, len(uids)-1)
	}
	for _, cfgs := range o.jit {
		registrations += max(0, len(cfgs)-1)
	}
	for _, js := range o.jobs {
		jobs += max(0, len(js)-1)
	}
	return pods, registrations, jobs
}

// counts: Runners created, failed (by reason), and the peak alive at once.
func (o *observer) counts() (created int, failed map[string]int, peak int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	failed = map[string]int{}
	for _, reason := range o.failed {
		failed[reason]++
	}
	return len(o.runners), failed, o.peak
}

// unused counts the Runners that neither ran a job nor failed: created for demand that
// went away, or retired by a scale-down.
func (o *observer) unused() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for name := range o.runners {
		if _, ran := o.jobs[name]; ran {
			continue
		}
		if _, failed := o.failed[name]; failed {
			continue
		}
		n++
	}
	return n
}

// createdSince counts Runners first seen after t.
func (o *observer) createdSince(t time.Time) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, at := range o.runners {
		if at.After(t) {
			n++
		}
	}
	return n
}

func (o *observer) failedRunners() map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]string, len(o.failed))
	for k, v := range o.failed {
		out[k] = v
	}
	return out
}
