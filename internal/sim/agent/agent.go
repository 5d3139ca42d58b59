// Package agent plays the GitHub Actions runner inside every Running runner pod of a
// simulated cluster: it reads the pod's JIT configuration as the official runner image
// does (ACTIONS_RUNNER_INPUT_JITCONFIG, however the pod supplies it: a literal, a
// Secret key, envFrom a Secret; else Gantry's Runner Secret), comes online on the
// GitHub simulator, takes one job (a scale set's runner takes its scale set's), runs
// it for its setup time (Options.Setup) and its duration, and then marks the pod so that kwok terminates the runner
// container with exit code 0 — what an ephemeral runner does. Pods of any controller
// count: Gantry's (by label) and any pod whose container may carry a JIT config.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/gantry-dev/gantry/internal/hookrelease"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// Kinds of Event.
const (
	// EventCreated: the watch saw a new runner pod.
	EventCreated = "created"
	// EventRunning: the pod runs; its agent started (Node is set).
	EventRunning = "running"
	// EventJobStarted: the runner started job Job.
	EventJobStarted = "job-started"
	// EventJobCompleted: the runner reported job Job completed.
	EventJobCompleted = "job-completed"
	// EventKilled: the runner process died before it finished: Cause says why, Job is
	// the job it was running (0: none).
	EventKilled = "killed"
	// EventExited: the runner process exited by itself (its job done, or retired).
	EventExited = "exited"
	// EventDeleted: the pod is gone from the API server (Node is where it was bound).
	EventDeleted = "deleted"
	// EventWorkflowPodCreated: the watch saw the workflow pod of runner pod Pod (its
	// label runner-pod), made by the container hook.
	EventWorkflowPodCreated = "workflow-pod-created"
	// EventWorkflowPodRunning: that workflow pod runs (Node is its node).
	EventWorkflowPodRunning = "workflow-pod-running"
	// EventWorkflowPodDeleted: that workflow pod is gone from the API server.
	EventWorkflowPodDeleted = "workflow-pod-deleted"
	// EventStepPodCreated, EventStepPodRunning and EventStepPodDeleted are the same for
	// a step pod of runner pod Pod (the hook's pod of an image action).
	EventStepPodCreated = "step-pod-created"
	EventStepPodRunning = "step-pod-running"
	EventStepPodDeleted = "step-pod-deleted"
)

// Causes of EventKilled.
const (
	// CausePodDeleted: the pod was deleted under the runner (the kubelet stops its
	// containers), by whoever deleted it.
	CausePodDeleted = "pod-deleted"
	// CauseNodeLost: the pod's node was lost (LoseNode).
	CauseNodeLost = "node-lost"
	// CauseStopped: the agents were shut down at the end of a run.
	CauseStopped = "stopped"
	// CauseEvicted: a kubelet evicted the pod under node pressure (Kill).
	CauseEvicted = "evicted"
	// CauseOOMKilled: the kernel's OOM killer ended the runner container (Kill).
	CauseOOMKilled = "oom-killed"
)

// killCause is why a runner process died before it finished: the cause of its context.
type killCause string

func (c killCause) Error() string { return string(c) }

var (
	errPodDeleted = killCause(CausePodDeleted)
	errNodeLost   = killCause(CauseNodeLost)
)

// Event is something an agent saw, for reports.
type Event struct {
	Pod   string
	Kind  string
	At    time.Time
	Job   int64
	Node  string
	Cause string
	// Hooked, on EventJobCompleted, says the job ran through the container hook;
	// Writes is then how many writes the hook made with the runner's token, and
	// Cause, when the job failed, the hook's or the runner's message.
	Hooked bool
	Writes int64
	// HostPorts, on the created events of pods (EventCreated, EventWorkflowPodCreated,
	// EventStepPodCreated), is how many hostPorts the pod's containers ask for.
	HostPorts int
}

// hostPorts counts the hostPorts p's containers ask for.
func hostPorts(p *corev1.Pod) int {
	n := 0
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, port := range c.Ports {
				if port.HostPort != 0 {
					n++
				}
			}
		}
	}
	return n
}

// Options tune the agents.
type Options struct {
	// RenewEvery is how often a runner renews the job it runs (POST
	// /_runner/jobs/{id}/renew), as the actions runner renews its job lock; 0 never
	// does. Set it below the simulator's RunnerLostTimeout.
	RenewEvery time.Duration
	// Setup, when set, is how long a runner prepares a job before its steps run — the
	// setup a warm cache cuts — asked once the job started, with the runner's pod: the
	// runner waits Setup and then the job's duration. Its caller decides what the pod's
	// volumes are worth; the agent knows nothing of caches.
	Setup func(ctx context.Context, pod *corev1.Pod, job *runnerapi.Job) time.Duration
}

// Agents runs one agent per Running runner pod in a namespace.
type Agents struct {
	cfg       *rest.Config
	kube      kubernetes.Interface
	namespace string
	http      *http.Client
	opts      Options

	mu        sync.Mutex
	running   map[types.UID]*agentState
	lostNodes map[string]bool
	events    []Event
	errs      []error
	wg        sync.WaitGroup
}

// agentState is one runner process.
type agentState struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	pod    string
	node   string
	job    atomic.Int64 // the job it runs, 0 before it started one
}

// New returns agents for the runner pods of namespace.
func New(cfg *rest.Config, namespace string, opts Options) (*Agents, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Agents{
		cfg: cfg, kube: kube, namespace: namespace, opts: opts,
		http:      &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}},
		running:   map[types.UID]*agentState{},
		lostNodes: map[string]bool{},
	}, nil
}

// LoseNode kills the runner processes of the pods on node, as when the machine dies,
// without a word to GitHub, and starts none there afterwards. It returns how many it
// killed and how many of those were running a job.
func (a *Agents) LoseNode(node string) (killed, busy int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lostNodes[node] = true
	for _, st := range a.running {
		if st.node == node && st.ctx.Err() == nil {
			killed++
			if st.job.Load() != 0 {
				busy++
			}
			st.cancel(errNodeLost)
		}
	}
	return killed, busy
}

// Kill kills the runner process of pod at once, without a word to GitHub, as a
// kubelet's hard eviction or the OOM killer does (SIGKILL); cause is CauseEvicted or
// CauseOOMKilled. It returns the job the runner was running (0: none) and whether a
// runner process of that pod was running.
func (a *Agents) Kill(pod, cause string) (job int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, st := range a.running {
		if st.pod == pod && st.ctx.Err() == nil {
			job = st.job.Load()
			st.cancel(killCause(cause))
			return job, true
		}
	}
	return 0, false
}

// Busy are the runner processes running a job now: the job of each, by pod name.
func (a *Agents) Busy() map[string]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int64{}
	for _, st := range a.running {
		if job := st.job.Load(); job != 0 && st.ctx.Err() == nil {
			out[st.pod] = job
		}
	}
	return out
}

// Run watches runner pods until ctx ends, then waits for its agents to stop.
func (a *Agents) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(a.kube, 0, informers.WithNamespace(a.namespace))
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && isRunnerPod(p) {
				// When the watch saw it: creationTimestamp has one-second granularity.
				a.record(Event{Pod: p.Name, Kind: EventCreated, At: time.Now(), HostPorts: hostPorts(p)})
				a.consider(ctx, p)
			}
		},
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok && isRunnerPod(p) {
				if p.DeletionTimestamp != nil {
					// The kubelet stops the containers of a pod being deleted.
					a.stop(p.UID, errPodDeleted)
					return
				}
				a.consider(ctx, p)
			}
		},
		DeleteFunc: func(obj any) {
			p, ok := obj.(*corev1.Pod)
			if t, tomb := obj.(cache.DeletedFinalStateUnknown); tomb {
				p, ok = t.Obj.(*corev1.Pod)
			}
			if ok && isRunnerPod(p) {
				a.stop(p.UID, errPodDeleted)
				a.record(Event{Pod: p.Name, Kind: EventDeleted, At: time.Now(), Node: p.Spec.NodeName})
			}
		},
	})
	if err != nil {
		return err
	}
	// Workflow pods, wherever the hooks create them: by their label.
	wfFactory := informers.NewSharedInformerFactoryWithOptions(a.kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = LabelRunnerPod
	}))
	if _, err := wfFactory.Core().V1().Pods().Informer().AddEventHandler(a.workflowPodHandler()); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	wfFactory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
	wfFactory.Shutdown()
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
	if _, ok := a.running[p.UID]; ok || a.lostNodes[p.Spec.NodeName] {
		a.mu.Unlock()
		return
	}
	actx, cancel := context.WithCancelCause(ctx)
	st := &agentState{ctx: actx, cancel: cancel, pod: p.Name, node: p.Spec.NodeName}
	a.running[p.UID] = st
	a.events = append(a.events, Event{Pod: p.Name, Kind: EventRunning, At: time.Now(), Node: p.Spec.NodeName})
	a.wg.Add(1)
	a.mu.Unlock()
	go func() {
		defer a.wg.Done()
		err := a.run(actx, p, st)
		if actx.Err() != nil {
			cause := CauseStopped
			var kc killCause
			if errors.As(context.Cause(actx), &kc) {
				cause = string(kc)
			}
			a.record(Event{Pod: p.Name, Kind: EventKilled, At: time.Now(), Job: st.job.Load(), Node: st.node, Cause: cause})
			return
		}
		if err != nil {
			a.mu.Lock()
			a.errs = append(a.errs, fmt.Errorf("agent of pod %s: %w", p.Name, err))
			a.mu.Unlock()
			// The runner process dies of it: exit 1, as the real one would.
			_ = a.exit(actx, p, 1)
		}
	}()
}

func (a *Agents) stop(uid types.UID, cause error) {
	a.mu.Lock()
	if st, ok := a.running[uid]; ok {
		st.cancel(cause)
	}
	a.mu.Unlock()
}

// isRunnerPod reports whether p runs a runner: Gantry's label, or a container that
// may carry ACTIONS_RUNNER_INPUT_JITCONFIG (a pod of another controller) — and is not
// a hook's workflow pod, whatever labels its template gave it.
func isRunnerPod(p *corev1.Pod) bool {
	if _, workflow := p.Labels[LabelRunnerPod]; workflow {
		return false
	}
	return p.Labels[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue || mayCarryJITConfig(p)
}

// workflowPodHandler records the life of the hooks' pods: workflow pods and step pods
// (by name: hookrelease.StepPodPrefix of the runner pod in their runner-pod label).
func (a *Agents) workflowPodHandler() cache.ResourceEventHandler {
	var mu sync.Mutex
	running := map[types.UID]bool{}
	kind := func(p *corev1.Pod, workflow, step string) string {
		if strings.HasPrefix(p.Name, hookrelease.StepPodPrefix(p.Labels[LabelRunnerPod])) {
			return step
		}
		return workflow
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				a.record(Event{Pod: p.Labels[LabelRunnerPod], Kind: kind(p, EventWorkflowPodCreated, EventStepPodCreated), At: time.Now(),
					Node: p.Spec.NodeName, HostPorts: hostPorts(p)})
			}
		},
		UpdateFunc: func(_, obj any) {
			p, ok := obj.(*corev1.Pod)
			if !ok || p.Status.Phase != corev1.PodRunning {
				return
			}
			mu.Lock()
			first := !running[p.UID]
			running[p.UID] = true
			mu.Unlock()
			if first {
				a.record(Event{Pod: p.Labels[LabelRunnerPod], Kind: kind(p, EventWorkflowPodRunning, EventStepPodRunning), At: time.Now(), Node: p.Spec.NodeName})
			}
		},
		DeleteFunc: func(obj any) {
			p, ok := obj.(*corev1.Pod)
			if t, tomb := obj.(cache.DeletedFinalStateUnknown); tomb {
				p, ok = t.Obj.(*corev1.Pod)
			}
			if ok {
				mu.Lock()
				delete(running, p.UID)
				mu.Unlock()
				a.record(Event{Pod: p.Labels[LabelRunnerPod], Kind: kind(p, EventWorkflowPodDeleted, EventStepPodDeleted), At: time.Now(), Node: p.Spec.NodeName})
			}
		},
	}
}

// run is one runner's life: JIT config → online → one job → exit 0.
func (a *Agents) run(ctx context.Context, p *corev1.Pod, st *agentState) error {
	get := func(ctx context.Context, name string) (*corev1.Secret, error) {
		return a.kube.CoreV1().Secrets(p.Namespace).Get(ctx, name, metav1.GetOptions{})
	}
	var rc *runnerapi.Client
	if cfg, found, err := jitConfigOf(ctx, p, get); err != nil {
		return fmt.Errorf("reading %s: %w", runner.EnvJITConfig, err)
	} else if found {
		if rc, err = runnerapi.NewClientFromJITConfig(cfg, a.http); err != nil {
			return fmt.Errorf("decoding the JIT configuration: %w", err)
		}
	} else if p.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
		return nil // not a runner after all: its envFrom Secret has no JIT config
	}
	if rc == nil {
		var err error
		if rc, err = a.gantryRunner(ctx, p); err != nil {
			return err
		}
	}
	return a.serve(ctx, p, st, rc)
}

// gantryRunner reads the Runner's Secret Gantry made (named after the pod): a
// registration token, or a JIT configuration.
func (a *Agents) gantryRunner(ctx context.Context, p *corev1.Pod) (*runnerapi.Client, error) {
	secret, err := a.kube.CoreV1().Secrets(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the JIT configuration: %w", err)
	}
	if tok, ok := secret.Data[runner.RegistrationTokenKey]; ok {
		// registrationMode RegistrationToken: register as config.sh --ephemeral does.
		return a.register(ctx, p, string(tok))
	}
	rc, err := runnerapi.NewClientFromJITConfig(string(secret.Data[runner.JITConfigKey]), a.http)
	if err != nil {
		return nil, fmt.Errorf("decoding the JIT configuration: %w", err)
	}
	return rc, nil
}

// serve comes online, takes one job, runs it and exits.
func (a *Agents) serve(ctx context.Context, p *corev1.Pod, st *agentState, rc *runnerapi.Client) error {
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
		st.job.Store(j.ID)
		if err := rc.StartJob(ctx, j.ID); err != nil {
			return fmt.Errorf("starting job %d: %w", j.ID, err)
		}
		a.record(Event{Pod: p.Name, Kind: EventJobStarted, At: time.Now(), Job: j.ID, Node: st.node})
		var setup time.Duration
		if a.opts.Setup != nil {
			setup = a.opts.Setup(ctx, p, j)
		}
		jctx, stopRenewing := a.renewing(ctx, rc, j)
		done, err := a.playJob(jctx, p, rc, j, setup)
		if rerr := stopRenewing(); rerr != nil && ctx.Err() == nil {
			return rerr
		}
		if err != nil {
			return err
		}
		if err := rc.CompleteJob(ctx, j.ID, done.conclusion); err != nil {
			return fmt.Errorf("completing job %d: %w", j.ID, err)
		}
		a.record(Event{Pod: p.Name, Kind: EventJobCompleted, At: time.Now(), Job: j.ID, Node: st.node,
			Cause: done.failure, Hooked: done.hooked, Writes: done.writes})
		st.job.Store(0)
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
	// The documented command passes --no-default-labels: GANTRY_RUNNER_LABELS holds every
	// label the runner registers, defaults included.
	var labels []string
	for _, l := range strings.Split(env[runner.EnvRunnerLabels], ",") {
		if l != "" {
			labels = append(labels, l)
		}
	}
	rc, err := runnerapi.Register(ctx, u.Scheme+"://"+u.Host, runnerapi.RegisterRequest{
		Token: token, Name: env[runner.EnvRunnerName], Labels: labels, NoDefaultLabels: true,
		RunnerGroup: env[runner.EnvRunnerGroup], Ephemeral: env[runner.EnvRunnerEphemeral] == "true",
	}, a.http)
	if err != nil {
		return nil, fmt.Errorf("registering with the registration token: %w", err)
	}
	return rc, nil
}

func (a *Agents) exit(ctx context.Context, p *corev1.Pod, code int) error {
	at := time.Now()
	a.record(Event{Pod: p.Name, Kind: EventExited, At: at, Node: p.Spec.NodeName})
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		cluster.AnnotationExitCode, fmt.Sprint(code), cluster.AnnotationExitedAt, at.UTC().Format(time.RFC3339Nano))
	_, err := a.kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
