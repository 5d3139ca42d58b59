// Package agent plays the GitHub Actions runner inside every Running runner pod of a
// simulated cluster: it reads the pod's JIT configuration from the Runner's Secret,
// comes online on the GitHub simulator, takes one job, runs it for its duration, and
// then marks the pod so that kwok terminates the runner container with exit code 0 —
// what an ephemeral runner does.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// Event is something an agent saw, for reports.
type Event struct {
	Pod  string
	Kind string // "created", "running", "job-started", "exited"
	At   time.Time
	Job  int64
}

// Agents runs one agent per Running runner pod in a namespace.
type Agents struct {
	kube      kubernetes.Interface
	namespace string
	http      *http.Client

	mu      sync.Mutex
	running map[types.UID]context.CancelFunc
	events  []Event
	errs    []error
	wg      sync.WaitGroup
}

// New returns agents for the runner pods of namespace.
func New(cfg *rest.Config, namespace string) (*Agents, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Agents{
		kube: kube, namespace: namespace,
		http:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}},
		running: map[types.UID]context.CancelFunc{},
	}, nil
}

// Run watches runner pods until ctx ends, then waits for its agents to stop.
func (a *Agents) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(a.kube, 0,
		informers.WithNamespace(a.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = v1alpha1.LabelManagedBy + "=" + v1alpha1.ManagedByValue
		}))
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				// When the watch saw it: creationTimestamp has one-second granularity.
				a.record(Event{Pod: p.Name, Kind: "created", At: time.Now()})
				a.consider(ctx, p)
			}
		},
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				a.consider(ctx, p)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				a.stop(p.UID)
			} else if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				if p, ok := t.Obj.(*corev1.Pod); ok {
					a.stop(p.UID)
				}
			}
		},
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	a.wg.Wait()
	return nil
}

// Events returns what the agents saw so far.
func (a *Agents) Events() []Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Event(nil), a.events...)
}

// Errors returns the agents' unexpected errors.
func (a *Agents) Errors() []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]error(nil), a.errs...)
}

func (a *Agents) record(e Event) {
	a.mu.Lock()
	a.events = append(a.events, e)
	a.mu.Unlock()
}

func (a *Agents) consider(ctx context.Context, p *corev1.Pod) {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return
	}
	if _, done := p.Annotations[cluster.AnnotationExitCode]; done {
		return
	}
	a.mu.Lock()
	if _, ok := a.running[p.UID]; ok {
		a.mu.Unlock()
		return
	}
	actx, cancel := context.WithCancel(ctx)
	a.running[p.UID] = cancel
	a.events = append(a.events, Event{Pod: p.Name, Kind: "running", At: time.Now()})
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		if err := a.run(actx, p); err != nil && actx.Err() == nil {
			a.mu.Lock()
			a.errs = append(a.errs, fmt.Errorf("agent of pod %s: %w", p.Name, err))
			a.mu.Unlock()
		}
	}()
}

func (a *Agents) stop(uid types.UID) {
	a.mu.Lock()
	if cancel, ok := a.running[uid]; ok {
		cancel()
	}
	a.mu.Unlock()
}

// run is one runner's life: JIT config → online → one job → exit 0.
func (a *Agents) run(ctx context.Context, p *corev1.Pod) error {
	secret, err := a.kube.CoreV1().Secrets(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading the JIT configuration: %w", err)
	}
	var rc *runnerapi.Client
	if tok, ok := secret.Data[runner.RegistrationTokenKey]; ok {
		// registrationMode RegistrationToken: register as config.sh --ephemeral does.
		if rc, err = a.register(ctx, p, string(tok)); err != nil {
			return err
		}
	} else if rc, err = runnerapi.NewClientFromJITConfig(string(secret.Data[runner.JITConfigKey]), a.http); err != nil {
		return fmt.Errorf("decoding the JIT configuration: %w", err)
	}
	if _, err := rc.Connect(ctx); err != nil {
		return fmt.Errorf("coming online: %w", err)
	}
	for {
		j, err := rc.NextJob(ctx, 30*time.Second)
		if errors.Is(err, runnerapi.ErrRunnerRemoved) {
			// Retired before it got a job: the runner process exits.
			return a.exit(ctx, p, 0)
		}
		if err != nil {
			return fmt.Errorf("waiting for a job: %w", err)
		}
		if j == nil {
			continue
		}
		if err := rc.StartJob(ctx, j.ID); err != nil {
			return fmt.Errorf("starting job %d: %w", j.ID, err)
		}
		a.record(Event{Pod: p.Name, Kind: "job-started", At: time.Now(), Job: j.ID})
		t := time.NewTimer(j.Duration())
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if err := rc.CompleteJob(ctx, j.ID, j.Conclusion); err != nil {
			return fmt.Errorf("completing job %d: %w", j.ID, err)
		}
		return a.exit(ctx, p, 0)
	}
}

// register plays config.sh with the settings Gantry put in the runner container's
// environment.
func (a *Agents) register(ctx context.Context, p *corev1.Pod, token string) (*runnerapi.Client, error) {
	env := map[string]string{}
	for _, c := range p.Spec.Containers {
		if c.Name == v1alpha1.RunnerContainerName {
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
		}
	}
	u, err := url.Parse(env[runner.EnvRunnerURL])
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the runner container has no usable %s", runner.EnvRunnerURL)
	}
	var labels []string
	for _, l := range strings.Split(env[runner.EnvRunnerLabels], ",") {
		if l != "" && !strings.EqualFold(l, "self-hosted") {
			labels = append(labels, l)
		}
	}
	rc, err := runnerapi.Register(ctx, u.Scheme+"://"+u.Host, runnerapi.RegisterRequest{
		Token: token, Name: env[runner.EnvRunnerName], Labels: labels,
		RunnerGroup: env[runner.EnvRunnerGroup], Ephemeral: env[runner.EnvRunnerEphemeral] == "true",
	}, a.http)
	if err != nil {
		return nil, fmt.Errorf("registering with the registration token: %w", err)
	}
	return rc, nil
}

func (a *Agents) exit(ctx context.Context, p *corev1.Pod, code int) error {
	a.record(Event{Pod: p.Name, Kind: "exited", At: time.Now()})
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, cluster.AnnotationExitCode, fmt.Sprint(code))
	_, err := a.kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
