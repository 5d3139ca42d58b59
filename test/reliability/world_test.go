package reliability

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/manager"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
	"github.com/gantry-dev/gantry/internal/testutil"
)

const (
	webhookSecretName = "gantry-webhook"
	credentialsName   = "github-creds"
	leaseName         = "gantry-controller.gantry.dev"
	org               = "acme"
	// serviceAccount is the controller's identity in every scenario.
	serviceAccount = "gantry-controller"
)

// repos are the organization's repositories jobs are queued in.
var repos = []string{"api", "web", "docs"}

// scale multiplies load and fault lengths: GANTRY_RELIABILITY_SCALE, default 1 (CI).
func scale() int {
	if n, err := strconv.Atoi(os.Getenv("GANTRY_RELIABILITY_SCALE")); err == nil && n > 0 {
		return n
	}
	return 1
}

var nsCounter atomic.Int64

// world is one scenario: a namespace, the GitHub simulator, the "Service" that routes
// GitHub's webhooks to the controller replicas, the fake kubelet with its runner
// agents, an observer of Runners and pods, and the secrets to look for afterwards.
type world struct {
	t       *testing.T
	ns      string
	c       client.Client
	sim     *simgithub.Sim
	simURL  string
	simSrv  *httptest.Server
	token   string
	hookKey string
	secrets *needles
	kubelet *kubelet
	obs     *observer
	svc     *service
	fig     *figures
	// kubeconfig is the controllers' (impersonating serviceAccount); apiProxy, when
	// set, stands between them and the API server.
	kubeconfig string
	apiProxy   *tcpProxy

	mu    sync.Mutex
	procs []*controllerProc
	// faulted are runner names whose pods a test hit on purpose (evicted, node lost):
	// a job killed with them is the fault's doing, not the controller's.
	faulted map[string]string
}

type worldOptions struct {
	// viaAPIProxy puts a TCP proxy the test can cut between controllers and the API
	// server.
	viaAPIProxy bool
	// rateLimits replaces "off" as the simulator's initial rate limits.
	rateLimits *simgithub.RateLimits
	// sessionTimeout is how long the Actions service keeps a silent scale set session
	// (0: the simulator's default).
	sessionTimeout time.Duration
}

func newWorld(t *testing.T, opts worldOptions) *world {
	t.Helper()
	w := &world{
		t: t, c: cp.c,
		token:   "ghp_" + randomHex(18),
		hookKey: "whsec-" + randomHex(16),
		secrets: newNeedles(),
		fig:     newFigures(t),
		faulted: map[string]string{},
	}
	w.secrets.add("github token", w.token)
	w.secrets.add("webhook secret", w.hookKey)
	w.ns = w.namespace()

	// GitHub.
	w.simSrv = httptest.NewUnstartedServer(nil)
	w.simURL = "http://" + w.simSrv.Listener.Addr().String()
	rl := simgithub.RateLimits{Disabled: true}
	if opts.rateLimits != nil {
		rl = *opts.rateLimits
	}
	w.sim = simgithub.New(simgithub.Options{
		URL:            w.simURL,
		PATs:           []simgithub.PAT{{Token: w.token, Login: "ci-bot", Scopes: []string{"repo", "admin:org", "manage_runners:org", "admin:org_hook"}}},
		RateLimits:     rl,
		WebhookTimeout: 10 * time.Second, // GitHub's
		WebhookWorkers: 8,
		// A runner whose pod was killed stops talking; GitHub notices and gives its
		// assigned job back to the queue.
		RunnerLostTimeout:     5 * time.Second,
		ActionsSessionTimeout: opts.sessionTimeout,
	})
	w.simSrv.Config.Handler = w.sim
	w.simSrv.Start()
	t.Cleanup(func() { w.simSrv.Close(); w.sim.Close() })
	if _, err := w.sim.CreateOrg(simgithub.OrgSpec{Login: org}); err != nil {
		t.Fatal(err)
	}
	for _, r := range repos {
		if _, err := w.sim.CreateRepo(simgithub.RepoSpec{Owner: org, Name: r}); err != nil {
			t.Fatal(err)
		}
	}

	// The controllers' identity: a ServiceAccount bound to the generated role only.
	w.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: serviceAccount}})
	w.create(&rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gantry-" + w.ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: managerRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: w.ns, Name: serviceAccount}},
	})
	t.Cleanup(func() {
		_ = cp.c.Delete(context.Background(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "gantry-" + w.ns}})
	})
	server := ""
	if opts.viaAPIProxy {
		u, err := url.Parse(cp.cfg.Host)
		if err != nil {
			t.Fatal(err)
		}
		w.apiProxy = newTCPProxy(t, u.Host)
		server = "https://" + w.apiProxy.addr
	}
	w.kubeconfig = filepath.Join(cp.dir, sanitize(t.Name())+".kubeconfig")
	if err := cp.writeKubeconfig(w.kubeconfig, server, w.saUser(),
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + w.ns, "system:authenticated"}); err != nil {
		t.Fatal(err)
	}

	w.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: credentialsName},
		Data:       map[string][]byte{"github_token": []byte(w.token)},
	})
	w.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: webhookSecretName},
		Data:       map[string][]byte{manager.WebhookSecretKey: []byte(w.hookKey)},
	})

	w.svc = newService(t)
	if _, err := w.sim.CreateHook(simgithub.HookSpec{Org: org, URL: w.svc.url + "/webhook", Secret: w.hookKey, Events: []string{"workflow_job"}}); err != nil {
		t.Fatal(err)
	}
	w.obs = newObserver(t, w.ns, w.secrets)
	w.kubelet = newKubelet(t, w)
	return w
}

func (w *world) saUser() string { return "system:serviceaccount:" + w.ns + ":" + serviceAccount }

func (w *world) namespace() string {
	w.t.Helper()
	base := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(w.t.Name()))
	if len(base) > 40 {
		base = base[:40]
	}
	name := fmt.Sprintf("%s-%d", strings.Trim(base, "-"), nsCounter.Add(1))
	w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	// As kube-controller-manager would: ServiceAccount admission refuses pods until
	// the namespace has its default ServiceAccount.
	w.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "default"}})
	return name
}

// controller starts one replica of the controller for this world.
func (w *world) controller(name string, mutate func(*procOptions)) *controllerProc {
	w.t.Helper()
	o := procOptions{
		name: name, kubeconfig: w.kubeconfig, namespace: w.ns,
		leaderElect: true, supervise: true,
		resyncInterval: resyncInterval, githubTimeout: 10 * time.Second,
	}
	if mutate != nil {
		mutate(&o)
	}
	p := startController(w.t, o)
	w.mu.Lock()
	w.procs = append(w.procs, p)
	w.mu.Unlock()
	w.svc.add(p)
	return p
}

// resyncInterval is the controllers' --resync-interval in every scenario: the bound on
// how long a lost webhook may delay a job.
const resyncInterval = 5 * time.Second

func (w *world) controllers() []*controllerProc {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*controllerProc(nil), w.procs...)
}

// leader waits until exactly one replica leads and returns it.
func (w *world) leader(timeout time.Duration) *controllerProc {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var leaders []*controllerProc
		for _, p := range w.controllers() {
			if p.isAlive() && p.isLeader() {
				leaders = append(leaders, p)
			}
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
		if len(leaders) > 1 {
			w.t.Fatalf("%d replicas lead at once", len(leaders))
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.t.Fatalf("no replica became leader within %s", timeout)
	return nil
}

// leaseHolder reads the leader-election Lease's holder.
func (w *world) leaseHolder() string {
	var l coordinationv1.Lease
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := cp.c.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: leaseName}, &l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// leaseAcquired reads the leader-election Lease's holder and when it acquired it.
func (w *world) leaseAcquired() (string, time.Time) {
	var l coordinationv1.Lease
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := cp.c.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: leaseName}, &l); err != nil ||
		l.Spec.HolderIdentity == nil || l.Spec.AcquireTime == nil {
		return "", time.Time{}
	}
	return *l.Spec.HolderIdentity, l.Spec.AcquireTime.Time
}

func (w *world) create(obj client.Object) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cp.c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		w.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// pool is a pool of this world: organization acme on the simulator, labels linux.
func (w *world) pool(name string) *testutil.RunnerPoolBuilder {
	return testutil.RunnerPool(w.ns, name).URL(w.simURL + "/" + org).Credentials(credentialsName).Labels("linux")
}

func (w *world) getPool(name string) *v1alpha1.RunnerPool {
	w.t.Helper()
	p := &v1alpha1.RunnerPool{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cp.c.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: name}, p); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// queue queues n jobs of the given duration, spread over the repositories, and
// returns their ids.
func (w *world) queue(n int, d time.Duration) []int64 {
	w.t.Helper()
	return w.queueIn(repos, n, d)
}

// queueIn queues n jobs of the given duration, spread over the given repositories.
func (w *world) queueIn(in []string, n int, d time.Duration) []int64 {
	w.t.Helper()
	ids := make([]int64, 0, n)
	for i := range n {
		j, err := w.sim.QueueJob(simgithub.JobSpec{
			Repo: org + "/" + in[i%len(in)], Labels: []string{"self-hosted", "linux"},
			Duration: simgithub.Duration(d), Workflow: "ci",
		})
		if err != nil {
			w.t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	w.fig.addJobs(n)
	return ids
}

// eventually polls cond every 100 ms until it holds or timeout passes.
func (w *world) eventually(what string, timeout time.Duration, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.dump()
	w.t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

// jobsDone reports whether every job the simulator knows is completed.
func (w *world) jobsDone() bool {
	for _, j := range w.sim.Jobs() {
		if j.Status != simgithub.StatusCompleted {
			return false
		}
	}
	return true
}

// jobsIn counts the simulator's jobs by status.
func (w *world) jobsIn(status string) int {
	n := 0
	for _, j := range w.sim.Jobs() {
		if j.Status == status {
			n++
		}
	}
	return n
}

// fault records that the test hit runner name's pod on purpose.
func (w *world) fault(runner, what string) {
	w.mu.Lock()
	w.faulted[runner] = what
	w.mu.Unlock()
}

func (w *world) faultedRunners() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]string, len(w.faulted))
	for k, v := range w.faulted {
		out[k] = v
	}
	return out
}

// dump logs what a failed wait needs to be understood, secrets redacted.
func (w *world) dump() {
	ctx := context.Background()
	var pools v1alpha1.RunnerPoolList
	_ = cp.c.List(ctx, &pools, client.InNamespace(w.ns))
	for _, p := range pools.Items {
		w.t.Logf("pool %s: status %s", p.Name, redact(fmt.Sprintf("%+v", p.Status)))
	}
	var runners v1alpha1.RunnerList
	_ = cp.c.List(ctx, &runners, client.InNamespace(w.ns))
	for _, r := range runners.Items {
		w.t.Logf("runner %s: deleting=%v phase=%s reason=%s message=%q job=%v", r.Name, !r.DeletionTimestamp.IsZero(),
			r.Status.Phase, r.Status.Reason, redact(r.Status.Message), r.Status.Job)
	}
	for _, j := range w.sim.Jobs() {
		if j.Status != simgithub.StatusCompleted || j.Conclusion != "success" {
			w.t.Logf("job %d %s: %s %s runner %q", j.ID, j.Repo, j.Status, j.Conclusion, j.RunnerName)
		}
	}
	for _, p := range w.controllers() {
		w.t.Logf("controller %s (alive %v, started %d times) log %s:\n%s", p.opts.name, p.isAlive(), p.startCount(), p.logPath, redact(tail(p.logPath, 15)))
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// httpDo sends one request and returns the status code (0 on a transport error).
func httpDo(req *http.Request) int {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func itoa(n int) string { return strconv.Itoa(n) }
