package run

import (
	"context"
	"maps"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/manager"
)

// runnerWatch records when each Runner object was first seen by a watch: with the
// pods' times it splits the controller's reaction into the pool's (job → Runner) and
// the Runner's (Runner → pod).
type runnerWatch struct {
	mu   sync.Mutex
	seen []time.Time
	// failures are the reasons and messages of the Runners that failed, by name (the
	// runner pod's name).
	failures map[string]string
	store    toolscache.Store
	sync     toolscache.InformerSynced
}

func watchRunners(ctx context.Context, cfg *rest.Config) (*runnerWatch, error) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return nil, err
	}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			var l v1alpha1.RunnerList
			err := c.List(ctx, &l, client.InNamespace(namespace), &client.ListOptions{Raw: &o})
			return &l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &v1alpha1.RunnerList{}, client.InNamespace(namespace), &client.ListOptions{Raw: &o})
		},
	}
	rw := &runnerWatch{failures: map[string]string{}}
	inf := toolscache.NewSharedIndexInformer(lw, &v1alpha1.Runner{}, 0, toolscache.Indexers{})
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			rw.mu.Lock()
			rw.seen = append(rw.seen, time.Now())
			rw.mu.Unlock()
			rw.noteFailure(obj)
		},
		UpdateFunc: func(_, obj any) { rw.noteFailure(obj) },
	}); err != nil {
		return nil, err
	}
	rw.store, rw.sync = inf.GetStore(), inf.HasSynced
	go inf.Run(ctx.Done())
	return rw, nil
}

// runners are the Runners the watch holds now: what the live view counts, without a
// List that would load the kube-apiserver under test (5,000 Runners a second in scale).
func (rw *runnerWatch) runners() []*v1alpha1.Runner {
	if !rw.sync() {
		return nil
	}
	objs := rw.store.List()
	out := make([]*v1alpha1.Runner, 0, len(objs))
	for _, o := range objs {
		if r, ok := o.(*v1alpha1.Runner); ok {
			out = append(out, r)
		}
	}
	return out
}

func (rw *runnerWatch) noteFailure(obj any) {
	r, ok := obj.(*v1alpha1.Runner)
	if !ok || r.Status.Reason == "" {
		return
	}
	rw.mu.Lock()
	rw.failures[r.Name] = r.Status.Reason + ": " + r.Status.Message
	rw.mu.Unlock()
}

// failed are the failure reasons and messages of the Runners seen failing, by name.
func (rw *runnerWatch) failed() map[string]string {
	if rw == nil {
		return nil
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return maps.Clone(rw.failures)
}

func (rw *runnerWatch) times() []time.Time {
	if rw == nil {
		return nil
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return append([]time.Time(nil), rw.seen...)
}
