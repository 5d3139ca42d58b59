package run

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/github"
	"github.com/gantry-dev/gantry/internal/manager"
)

// The floor's oracle runs as a process of its own (`gantry sim oracle`, started by the
// harness) so that its CPU time is its own: the floor of the controller's CPU per job,
// measured in the same run as Gantry's. The harness writes each job's id on the
// oracle's standard input the moment the job is queued, and closes it after the last;
// the oracle serves every id it reads with floorWorkers workers, then writes an
// OracleResult as JSON on its standard output and exits.

// OracleOptions are what `gantry sim oracle` is told.
type OracleOptions struct {
	// Kube reaches the kube-apiserver (an identity the audit log ignores).
	Kube *rest.Config
	// GitHubURL is the simulator's REST base URL.
	GitHubURL string
	// Pool is the pool whose template, labels and credentials Secret the oracle uses.
	Pool types.NamespacedName
	// Workers is how many jobs it serves at once.
	Workers int
}

// OracleResult is what the oracle says when it is done.
type OracleResult struct {
	Served int    `json:"served"`
	Errors int    `json:"errors"`
	Error  string `json:"error,omitempty"` // the first
}

// ServeOracle reads job ids, one per line, from in until it ends, serves each (a JIT
// configuration, its Secret, the pod) with opts.Workers workers, and returns once all
// are served. It fails only when it cannot start: no pool, no credentials.
func ServeOracle(ctx context.Context, opts OracleOptions, in io.Reader) (OracleResult, error) {
	cfg := rest.CopyConfig(opts.Kube)
	cfg.QPS = -1 // as the controller's: no client-side rate limit
	kube, err := client.New(cfg, client.Options{Scheme: manager.Scheme()})
	if err != nil {
		return OracleResult{}, err
	}
	pool := &v1alpha1.RunnerPool{}
	if err := kube.Get(ctx, opts.Pool, pool); err != nil {
		return OracleResult{}, fmt.Errorf("reading pool %s: %w", opts.Pool, err)
	}
	scope, err := github.ParseURL(pool.Spec.GitHub.URL)
	if err != nil {
		return OracleResult{}, fmt.Errorf("pool %s: %w", opts.Pool, err)
	}
	var creds corev1.Secret
	credsKey := types.NamespacedName{Namespace: pool.Namespace, Name: pool.Spec.GitHub.CredentialsSecretRef.Name}
	if err := kube.Get(ctx, credsKey, &creds); err != nil {
		return OracleResult{}, fmt.Errorf("reading the pool's credentials: %w", err)
	}
	cred, err := github.ParseCredentials(creds.Data)
	if err != nil {
		return OracleResult{}, fmt.Errorf("the pool's credentials Secret %s: %w", credsKey, err)
	}
	if cred.Token == "" {
		return OracleResult{}, fmt.Errorf("the pool's credentials Secret %s holds App credentials; the oracle registers with a token (%s)",
			credsKey, github.KeyToken)
	}
	o := &oracle{
		kube: kube, simURL: strings.TrimSuffix(opts.GitHubURL, "/"), org: scope.Owner, token: cred.Token, pool: pool,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: opts.Workers}, Timeout: 30 * time.Second},
	}
	served := serveIDs(ctx, in, max(1, opts.Workers), o.serve)
	res := OracleResult{Served: served, Errors: int(o.errors.Load())}
	if err := o.firstErr(); err != nil {
		res.Error = err.Error()
	}
	return res, nil
}

// serveIDs calls serve for each id read from in, workers at a time, and returns how
// many it served once in has ended (or ctx is done) and every call has returned. A
// line that is not an id is skipped.
func serveIDs(ctx context.Context, in io.Reader, workers int, serve func(context.Context, int64)) int {
	ids := make(chan int64)
	var wg sync.WaitGroup
	var served atomic.Int64
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				serve(ctx, id)
				served.Add(1)
			}
		}()
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() && ctx.Err() == nil {
		id, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64)
		if err != nil {
			continue
		}
		ids <- id
	}
	close(ids)
	wg.Wait()
	return int(served.Load())
}

// oracle does, per job, what every controller must: a JIT configuration, its Secret,
// the pod.
type oracle struct {
	kube   client.Client
	http   *http.Client
	simURL string
	org    string
	token  string
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
		"name": name, "runner_group_id": 1, "labels": o.pool.RunnerLabels(), "work_folder": "_work",
	})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.simURL+"/orgs/"+o.org+"/actions/runners/generate-jitconfig", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "token "+o.token)
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
