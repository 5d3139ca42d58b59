package run

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	containerhooks "github.com/gantry-dev/gantry/config/container-hooks"
	"github.com/gantry-dev/gantry/internal/controller/runnerpool"
	"github.com/gantry-dev/gantry/internal/manager"
	"github.com/gantry-dev/gantry/internal/sim/agent"
	"github.com/gantry-dev/gantry/internal/sim/cluster"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// controllerUser is the user the controller runs as on the simulated cluster: the
// kube-apiserver's audit log records its requests, and only its.
const controllerUser = "gantry-controller"

// world is what a run starts before its workload: the simulated cluster, the GitHub
// simulator with acme's repositories and webhook, the pools, the controller (running),
// the runner agents and a watch of the Runners. stop stops all of it, in reverse order.
type world struct {
	cl     *cluster.Cluster
	sim    *simgithub.Sim
	simURL string
	// pools are the scenario's pools (Scenario.poolNames), all in namespace ci.
	pools   []*v1alpha1.RunnerPool
	ctrl    *controller
	agents  *agent.Agents
	runners *runnerWatch
	// disruptor plays the fault schedule's drains, reclaims and evictions, and keeps
	// their record.
	disruptor *disruptor
	// cache plays the jobs' setup and measures the cache, when the scenario has a
	// setup time or a cache; else nil.
	cache *cacheMeter

	stopAgents func() // idempotent: stops the agents and waits for them
	cleanups   []func()
}

// stop stops what startWorld started, last started first.
func (w *world) stop() {
	for i := len(w.cleanups) - 1; i >= 0; i-- {
		w.cleanups[i]()
	}
	w.cleanups = nil
}

func (w *world) onStop(f func()) { w.cleanups = append(w.cleanups, f) }

// startWorld starts the world of sc. On error, what was started is stopped.
func startWorld(ctx context.Context, sc Scenario, opts Options) (_ *world, err error) {
	say := func(format string, args ...any) { fmt.Fprintf(opts.Out, format+"\n", args...) }
	w := &world{}
	defer func() {
		if err != nil {
			w.stop()
		}
	}()

	say("Scenario %s: %s", sc.Name, sc.Description)
	w.cl, err = cluster.Start(ctx, cluster.Options{
		BinDir: opts.BinDir, WorkDir: filepath.Join(opts.OutDir, "cluster"),
		Nodes: sc.Nodes, NodeArchs: sc.nodeArchs(), PodStartDelay: sc.PodStartDelay, NodeMonitorGracePeriod: sc.NodeMonitorGracePeriod, Log: opts.Out,
		AuditUser: controllerUser,
	})
	if err != nil {
		return nil, err
	}
	w.onStop(func() { _ = w.cl.Stop() })

	if err := w.startGitHub(ctx, sc); err != nil {
		return nil, err
	}
	say("GitHub simulator on %s", w.simURL)

	// The controller, as a separate process, exactly as it runs in a cluster.
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	webhookAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	var eviction evictionWebhook
	if bin := cmp.Or(opts.Controller, opts.Gantry); servesEvictions(ctx, bin, opts.GantryEnv) {
		if eviction, err = setupEvictionWebhook(ctx, w.cl.Client, ports[3], filepath.Join(opts.OutDir, "eviction-webhook"), sc.watchedNamespaces()); err != nil {
			return nil, err
		}
	} else {
		say("%s has no eviction webhook: runs without", bin)
	}
	// The hook is there for a ScaleSet pool too: the organization's webhooks still
	// arrive, and the controller must ignore them for such a pool.
	if _, err := w.sim.CreateHook(simgithub.HookSpec{Org: org, URL: "http://" + webhookAddr + "/webhook", Secret: hookSecret, Events: []string{"workflow_job"}}); err != nil {
		return nil, err
	}
	w.pools = newPools(sc, w.simURL)
	if err := setupNamespaces(ctx, w.cl.Client, w.pools, sc.credentials()); err != nil {
		return nil, err
	}
	if len(w.pools) > 1 {
		say("%d RunnerPools %s … %s created", len(w.pools), w.pools[0].Name, w.pools[len(w.pools)-1].Name)
	}
	if h := sc.WarmHistory; h != nil {
		if err := seedWarmHistory(ctx, w.cl.Client, sc.poolNames(), *h, time.Now()); err != nil {
			return nil, err
		}
	}
	w.ctrl, err = newController(opts, sc, w.cl.AuditedKubeconfig, webhookAddr, eviction, ports[1], ports[2])
	if err != nil {
		return nil, err
	}
	w.onStop(func() { w.ctrl.stop() })
	pid, err := w.ctrl.Start(ctx)
	if err != nil {
		return nil, err
	}
	say("Gantry controller running (pid %d, logs in %s)", pid, w.ctrl.logPath)

	var agentOpts agent.Options
	if sc.RunnerLostTimeout > 0 {
		agentOpts.RenewEvery = sc.RunnerLostTimeout / 4
	}
	if sc.Cache != nil || sc.CacheSetup > 0 {
		w.cache = newCacheMeter(w.cl.Client, sc)
		agentOpts.Setup = w.cache.setup
	}
	if w.agents, err = agent.New(w.cl.Config, namespace, agentOpts); err != nil {
		return nil, err
	}
	w.disruptor = newDisruptor(w.cl, w.agents)
	actx, cancelAgents := context.WithCancel(ctx)
	agentsDone := make(chan struct{})
	go func() { _ = w.agents.Run(actx); close(agentsDone) }()
	w.stopAgents = func() { cancelAgents(); <-agentsDone }
	w.onStop(w.stopAgents)

	rctx, stopRunnerWatch := context.WithCancel(ctx)
	w.onStop(stopRunnerWatch)
	if w.runners, err = watchRunners(rctx, w.cl.Config); err != nil {
		return nil, err
	}
	return w, nil
}

// startGitHub serves the GitHub simulator on loopback with organization acme, the
// workload's repositories and a PAT.
func (w *world) startGitHub(ctx context.Context, sc Scenario) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	w.simURL = "http://" + ln.Addr().String()
	var pats []simgithub.PAT
	for _, c := range sc.credentials() {
		pats = append(pats, simgithub.PAT{Token: c.token, Login: "gantry-sim", Scopes: []string{"repo", "admin:org", "manage_runners:org", "admin:org_hook"}})
	}
	w.sim = simgithub.New(simgithub.Options{
		URL:               w.simURL,
		PATs:              pats,
		RateLimits:        sc.RateLimits,
		WebhookWorkers:    16,
		RunnerLostTimeout: sc.RunnerLostTimeout,
	})
	w.onStop(w.sim.Close)
	srv := &http.Server{Handler: w.sim, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	w.onStop(func() { _ = srv.Close() })
	if _, err := w.sim.CreateOrg(simgithub.OrgSpec{Login: org}); err != nil {
		return err
	}
	for _, name := range repoNames(sc) {
		if _, err := w.sim.CreateRepo(simgithub.RepoSpec{Owner: org, Name: name}); err != nil {
			return err
		}
	}
	return nil
}

// newPools are the scenario's RunnerPools, one per name of Scenario.poolNames: ci/linux
// alone, or ci/linux-001, ci/linux-002, … of the same spec, or a fleet's (fleetPool).
func newPools(sc Scenario, simURL string) []*v1alpha1.RunnerPool {
	names := sc.poolNames()
	pools := make([]*v1alpha1.RunnerPool, 0, len(names))
	for i, name := range names {
		pool := newPool(sc, simURL, name)
		if sc.Fleet != nil {
			fleetPool(sc, pool, i)
		}
		pools = append(pools, pool)
	}
	return pools
}

// newPool is the scenario's RunnerPool ci/NAME, pointed at the simulator, with the
// scenario's demand source (a ScaleSet pool's scale set is named NAME too).
func newPool(sc Scenario, simURL, name string) *v1alpha1.RunnerPool {
	pool := &v1alpha1.RunnerPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.RunnerPoolSpec{
			GitHub: v1alpha1.GitHubSpec{URL: simURL + "/" + org, CredentialsSecretRef: v1alpha1.SecretReference{Name: "github-creds"}},
			Labels: sc.poolLabels(), MinIdle: sc.MinIdle, MaxRunners: sc.MaxRunners, RegistrationMode: sc.Mode,
			Demand: v1alpha1.DemandSpec{Source: sc.DemandSource},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: v1alpha1.RunnerContainerName, Image: "ghcr.io/actions/actions-runner:latest",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}},
			}}}},
		},
	}
	maps.Copy(pool.Spec.Template.Spec.Containers[0].Resources.Requests, sc.RunnerRequests)
	if sc.PodLabels {
		pool.Spec.Usage = &v1alpha1.UsageSpec{PodLabels: true}
	}
	if sc.Warm != nil {
		pool.Spec.Warm = sc.Warm.DeepCopy()
	}
	if sc.Disruption != nil {
		pool.Spec.Disruption = *sc.Disruption.DeepCopy()
	}
	if sc.Cache != nil {
		c := sc.Cache.DeepCopy()
		if c.VolumeClaimTemplate.StorageClassName == nil {
			c.VolumeClaimTemplate.StorageClassName = ptr.To(cluster.StorageClass)
		}
		pool.Spec.Caches = []v1alpha1.CacheSpec{*c}
		runner := &pool.Spec.Template.Spec.Containers[0]
		runner.VolumeMounts = append(runner.VolumeMounts, corev1.VolumeMount{Name: c.Name, MountPath: cacheMountPath})
	}
	if cj := sc.ContainerJobs; cj != nil {
		pool.Spec.ContainerMode = &v1alpha1.ContainerModeSpec{Type: v1alpha1.ContainerModeKubernetes, Namespace: jobsNamespace}
		if cj.PrepareJobTimeout > 0 {
			pool.Spec.ContainerMode.PrepareJobTimeout = &metav1.Duration{Duration: cj.PrepareJobTimeout}
		}
		if cj.ImagePullGracePeriod > 0 {
			pool.Spec.Recovery.ImagePullGracePeriod = &metav1.Duration{Duration: cj.ImagePullGracePeriod}
		}
	}
	if sc.NodeLostTimeout > 0 {
		pool.Spec.Recovery.NodeLostTimeout = &metav1.Duration{Duration: sc.NodeLostTimeout}
	}
	if sc.PodTerminationGracePeriod > 0 {
		secs := int64(sc.PodTerminationGracePeriod.Seconds())
		pool.Spec.Template.Spec.TerminationGracePeriodSeconds = &secs
	}
	if sc.UnreachableToleration > 0 {
		secs := int64(sc.UnreachableToleration.Seconds())
		for _, key := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady} {
			pool.Spec.Template.Spec.Tolerations = append(pool.Spec.Template.Spec.Tolerations, corev1.Toleration{
				Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs,
			})
		}
	}
	return pool
}

// setupNamespaces creates the namespaces, the webhook Secret, the GitHub credentials
// Secrets (creds) and the pools. A Kubernetes-mode pool gets, as its install would give it, its
// workflow pods' namespace (Pod Security baseline), the gantry-container-hook
// ClusterRole that the controller binds there and the hook's admission policy.
func setupNamespaces(ctx context.Context, c client.Client, pools []*v1alpha1.RunnerPool, creds []credential) error {
	namespaces := []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, {ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}}
	if slices.ContainsFunc(pools, func(p *v1alpha1.RunnerPool) bool { return p.Spec.ContainerMode.IsKubernetes() }) {
		namespaces = append(namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: jobsNamespace,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}})
		if err := installContainerHookFence(ctx, c); err != nil {
			return err
		}
	}
	for _, ns := range namespaces {
		if err := c.Create(ctx, ns); err != nil {
			return err
		}
		// Pods are admitted once the namespace's default ServiceAccount exists.
		if err := cluster.WaitForDefaultServiceAccount(ctx, c, ns.Name); err != nil {
			return err
		}
	}
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "gantry-webhook"},
			Data: map[string][]byte{manager.WebhookSecretKey: []byte(hookSecret)}},
	}
	for _, cr := range creds {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: cr.secret},
			Data: map[string][]byte{"github_token": []byte(cr.token)}})
	}
	for _, p := range pools {
		objs = append(objs, p.DeepCopy())
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// installContainerHookFence installs what an install of Gantry brings for Kubernetes
// mode: the gantry-container-hook ClusterRole the controller binds, and the admission
// policy (with its binding) on what a hook token may write.
func installContainerHookFence(ctx context.Context, c client.Client) error {
	objs, err := containerHookFence()
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

// containerHookFence is the ClusterRole, the policy and its binding.
func containerHookFence() ([]client.Object, error) {
	objs := []client.Object{&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: runnerpool.ContainerHookClusterRole}, Rules: runnerpool.ContainerHookRules}}
	for _, doc := range strings.Split(string(containerhooks.AdmissionPolicy), "\n---") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return nil, fmt.Errorf("reading the container hook's admission policy: %w", err)
		}
		var obj client.Object
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		default:
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("reading the container hook's %s: %w", meta.Kind, err)
		}
		objs = append(objs, obj)
	}
	if len(objs) != 3 {
		return nil, fmt.Errorf("the container hook's admission policy file holds %d objects, want a policy and its binding", len(objs)-1)
	}
	return objs, nil
}

// simNodes loses nodes of the simulated cluster, the runner processes on them first.
type simNodes struct {
	cl     *cluster.Cluster
	agents *agent.Agents
}

func (n simNodes) BusiestNode(ctx context.Context) (string, error) { return n.cl.BusiestNode(ctx) }

func (n simNodes) LoseNode(ctx context.Context, node, how string) (pods, busy int, err error) {
	// The machine dies: its runner processes stop talking to GitHub at once.
	_, busy = n.agents.LoseNode(node)
	lost, err := n.cl.LoseNode(ctx, node, cluster.NodeLoss(how))
	return len(lost), busy, err
}

func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
