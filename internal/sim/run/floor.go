package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// floorWorkers is how many jobs the oracle serves at once: the runners the controller
// reconciles at once (`gantry controller --runner-concurrency`, default 64).
const floorWorkers = 64

// floorPodPrefix starts the names of the oracle's Secrets and pods.
const floorPodPrefix = "floor-"

// floorEnv is what the oracle needs of the world.
type floorEnv struct {
	// cfg reaches the kube-apiserver as an administrator the audit log ignores.
	cfg    *rest.Config
	sim    *simgithub.Sim
	simURL string
	pool   *v1alpha1.RunnerPool
	agents interface{ Events() []agent.Event }
}

// floorEnv is the oracle's view of the world: its one pool (Scenario.hasFloor).
func (w *world) floorEnv() floorEnv {
	return floorEnv{cfg: w.cl.Config, sim: w.sim, simURL: w.simURL, pool: w.pools[0], agents: w.agents}
}

// floorRun is what the oracle's run left for the report.
type floorRun struct {
	start          time.Time
	end            time.Time
	jobs           []simgithub.Job
	events         []agent.Event
	finished       bool
	clusterDrained bool
	errors         int
	firstErr       error
	cleanedUp      bool
	// load is the 1-minute load average when the oracle started and when it ended.
	load [2]float64
}

// runFloor runs the oracle: the workload again (same seed), served by the least any
// controller must do — for each job, the moment it is queued, one generate-jitconfig
// call, a Secret and a Pod shaped as Gantry's (same agents take the jobs) — by
// floorWorkers workers. It waits for the jobs, then deletes its Secrets and pods.
// Run it with the controller stopped: nothing else may answer the jobs.
func runFloor(ctx context.Context, env floorEnv, wl workload, seed uint64, timeout time.Duration, out io.Writer) (floorRun, error) {
	cfg := rest.CopyConfig(env.cfg)
	cfg.QPS = -1 // as the controller's: no client-side rate limit
	kube, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return floorRun{}, err
	}
	o := &oracle{
		kube: kube, simURL: env.simURL, pool: env.pool,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: floorWorkers}, Timeout: 30 * time.Second},
	}
	var fr floorRun
	fr.clusterDrained = o.clusterEmpty(ctx)
	skip, evFrom := len(env.sim.Jobs()), len(env.agents.Events())
	fmt.Fprintf(out, "Floor: the same workload served by an oracle (%d workers, no controller)\n", floorWorkers)

	feed := newJobFeed()
	var wg sync.WaitGroup
	for range floorWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j, ok := feed.next(ctx)
				if !ok {
					return
				}
				o.serve(ctx, j.id)
			}
		}()
	}
	fr.start, fr.load[0] = time.Now(), loadAvg()[0]
	queued, qerr := queueWorkload(ctx, env.sim, wl, seed, feed.add)
	feed.close()
	if qerr == nil {
		fr.jobs, fr.finished, _ = waitJobs(ctx, env.sim, skip, len(queued), fr.start.Add(timeout))
	}
	fr.end, fr.load[1] = time.Now(), loadAvg()[0]
	wg.Wait()
	for _, e := range env.agents.Events()[evFrom:] {
		if strings.HasPrefix(e.Pod, floorPodPrefix) {
			fr.events = append(fr.events, e)
		}
	}
	fr.errors, fr.firstErr = int(o.errors.Load()), o.firstErr()
	fr.cleanedUp = o.cleanUp(ctx, 2*time.Minute)
	fmt.Fprintf(out, "Floor: %d jobs in %.1fs (finished %v, %d errors)\n", len(fr.jobs), fr.end.Sub(fr.start).Seconds(), fr.finished, fr.errors)
	return fr, qerr
}

// oracle does, per job, what every controller must: a JIT configuration, its Secret,
// the pod.
type oracle struct {
	kube   client.Client
	http   *http.Client
	simURL string
	pool   *v1alpha1.RunnerPool

	errors atomic.Int64
	mu     sync.Mutex
	first  error
}

func (o *oracle) fail(err error) {
	o.errors.Add(1)
	o.mu.Lock()
	if o.first == nil {
		o.first = err
	}
	o.mu.Unlock()
}

func (o *oracle) firstErr() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.first
}

// serve registers a runner for job id and starts its pod. Any runner may take any
// job, as with Gantry: the name only keeps them apart.
func (o *oracle) serve(ctx context.Context, id int64) {
	name := fmt.Sprintf("%s%d", floorPodPrefix, id)
	jit, err := o.generateJIT(ctx, name)
	if err != nil {
		o.fail(err)
		return
	}
	labels := map[string]string{
		v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue,
		v1alpha1.LabelPool:      o.pool.Name,
		v1alpha1.LabelRunner:    name,
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.pool.Namespace, Name: name, Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{runner.JITConfigKey: []byte(jit)},
	}
	if err := o.kube.Create(ctx, secret); err != nil {
		o.fail(fmt.Errorf("creating secret %s: %w", name, err))
		return
	}
	if err := o.kube.Create(ctx, floorPod(o.pool, name)); err != nil {
		o.fail(fmt.Errorf("creating pod %s: %w", name, err))
	}
}

// generateJIT is one POST generate-jitconfig, as Gantry's GitHub client makes it.
func (o *oracle) generateJIT(ctx context.Context, name string) (string, error) {
	body, err := json.Marshal(map[string]any{
		"name": name, "runner_group_id": 1, "labels": o.pool.Spec.RunnerLabels(), "work_folder": "_work",
	})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.simURL+"/orgs/"+org+"/actions/runners/generate-jitconfig", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "token "+simToken)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("Content-Type", "application/json")
	resp, err := o.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("generating the JIT configuration of %s: %w", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("generating the JIT configuration of %s: GitHub answered %s", name, resp.Status)
	}
	var out struct {
		EncodedJITConfig string `json:"encoded_jit_config"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", fmt.Errorf("generating the JIT configuration of %s: %w", name, err)
	}
	if out.EncodedJITConfig == "" {
		return "", errors.New("generating the JIT configuration of " + name + ": no encoded_jit_config in the answer")
	}
	return out.EncodedJITConfig, nil
}

// floorPod is the pod Gantry's runner controller makes for a Runner called name
// (internal/controller/runner's buildPod), without the owner reference the oracle has
// no Runner for: the pool's template, Gantry's labels, restartPolicy Never, the
// restricted security defaults of a template that sets none, and the JIT
// configuration from the Secret of the same name.
func floorPod(pool *v1alpha1.RunnerPool, name string) *corev1.Pod {
	tmpl := pool.Spec.Template.DeepCopy()
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name, pod.Namespace, pod.GenerateName = name, pool.Namespace, ""
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
	pod.Labels[v1alpha1.LabelPool] = pool.Name
	pod.Labels[v1alpha1.LabelRunner] = name
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	if !hasSecurityContext(&pod.Spec) {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To[int64](runner.RunnerUID),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
		for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				cs[i].SecurityContext = &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				}
			}
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name == v1alpha1.RunnerContainerName {
			c.Env = append(c.Env, corev1.EnvVar{Name: runner.EnvJITConfig, ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: runner.JITConfigKey},
			}})
		}
	}
	return pod
}

func hasSecurityContext(spec *corev1.PodSpec) bool {
	if spec.SecurityContext != nil {
		return true
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			if cs[i].SecurityContext != nil {
				return true
			}
		}
	}
	return false
}

// clusterEmpty reports whether the pool's namespace holds no runner pod or Secret.
func (o *oracle) clusterEmpty(ctx context.Context) bool {
	managed := client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	var pods corev1.PodList
	var secrets corev1.SecretList
	if err := o.kube.List(ctx, &pods, client.InNamespace(o.pool.Namespace), managed); err != nil {
		return false
	}
	if err := o.kube.List(ctx, &secrets, client.InNamespace(o.pool.Namespace), managed); err != nil {
		return false
	}
	return len(pods.Items) == 0 && len(secrets.Items) == 0
}

// cleanUp deletes the oracle's pods and Secrets and waits until they are gone.
func (o *oracle) cleanUp(ctx context.Context, timeout time.Duration) bool {
	ns := client.InNamespace(o.pool.Namespace)
	managed := client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	_ = o.kube.DeleteAllOf(ctx, &corev1.Pod{}, ns, managed)
	_ = o.kube.DeleteAllOf(ctx, &corev1.Secret{}, ns, managed)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if o.clusterEmpty(ctx) {
			return true
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false
}

// jobFeed hands queued jobs to the oracle's workers the moment they are queued,
// however many are waiting.
type jobFeed struct {
	mu     sync.Mutex
	ready  chan struct{} // closed and replaced when a job is added or the feed closed
	queue  []queuedJob
	closed bool
}

func newJobFeed() *jobFeed { return &jobFeed{ready: make(chan struct{})} }

func (f *jobFeed) add(j queuedJob) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	f.queue = append(f.queue, j)
	close(f.ready)
	f.ready = make(chan struct{})
}

func (f *jobFeed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.ready)
	}
}

// next takes the next job; false once the feed is closed and empty, or ctx done.
func (f *jobFeed) next(ctx context.Context) (queuedJob, bool) {
	for {
		f.mu.Lock()
		if len(f.queue) > 0 {
			j := f.queue[0]
			f.queue = f.queue[1:]
			f.mu.Unlock()
			return j, true
		}
		if f.closed {
			f.mu.Unlock()
			return queuedJob{}, false
		}
		ready := f.ready
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return queuedJob{}, false
		case <-ready:
		}
	}
}
