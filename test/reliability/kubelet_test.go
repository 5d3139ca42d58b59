package reliability

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runner"
	"github.com/gantry-dev/gantry/internal/sim/github/runnerapi"
)

// kubelet plays the scheduler and the kubelets of a few nodes for the runner pods of
// one namespace: it binds each new pod to a node, starts it after startDelay (unless
// hold says to keep it Pending), runs a simulated runner agent in it — the agent reads
// the JIT configuration from the pod's Secret, comes online on the simulator, takes one
// job, runs it for its duration (renewing its job lock) and reports it completed — and
// then marks the pod Succeeded with exit code 0. A pod being deleted has its agent
// killed and its deletion confirmed, unless its node is lost: then nothing answers for
// it, as when a machine dies.
type kubelet struct {
	t     *testing.T
	w     *world
	nodes []string
	http  *http.Client

	mu         sync.Mutex
	startDelay time.Duration
	hold       func(*corev1.Pod) bool
	lost       map[string]bool
	pods       map[types.UID]*podRun
	errs       []string
	started    int
	// restricted and unrestricted count the runner pods that do and do not carry the
	// restricted security defaults (the scenarios' templates set no securityContext).
	restricted, unrestricted int
	// inspected counts the runner pods whose credentials were checked as admitted;
	// credentials lists what any of them carried beyond its own JIT configuration.
	inspected   int
	credentials []string
}

type podRun struct {
	name, node string
	cancel     context.CancelFunc
	confirmed  bool
}

func newKubelet(t *testing.T, w *world) *kubelet {
	k := &kubelet{
		t: t, w: w, nodes: []string{"node-a", "node-b", "node-c"},
		http:       &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}},
		startDelay: 300 * time.Millisecond,
		lost:       map[string]bool{},
		pods:       map[types.UID]*podRun{},
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(cp.kube, 0, informers.WithNamespace(w.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = v1alpha1.LabelManagedBy + "=" + v1alpha1.ManagedByValue
		}))
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.sync(ctx, obj) },
		UpdateFunc: func(_, obj any) { k.sync(ctx, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				k.kill(p.UID)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		k.mu.Lock()
		for _, pr := range k.pods {
			pr.cancel()
		}
		k.mu.Unlock()
	})
	return k
}

// setHold keeps pods for which hold returns true Pending (nil releases them).
func (k *kubelet) setHold(hold func(*corev1.Pod) bool) {
	k.mu.Lock()
	k.hold = hold
	k.mu.Unlock()
}

func (k *kubelet) holding(p *corev1.Pod) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.hold != nil && k.hold(p)
}

func (k *kubelet) errorf(format string, args ...any) {
	k.mu.Lock()
	k.errs = append(k.errs, fmt.Sprintf(format, args...))
	k.mu.Unlock()
}

// errors returns what the agents met that a real runner would log as an error.
func (k *kubelet) errors() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.errs...)
}

func (k *kubelet) sync(ctx context.Context, obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	k.mu.Lock()
	pr := k.pods[p.UID]
	if pr == nil {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			k.mu.Unlock()
			return
		}
		node := k.nodes[k.started%len(k.nodes)]
		for i := 0; k.lost[node] && i < len(k.nodes); i++ {
			node = k.nodes[(k.started+i)%len(k.nodes)]
		}
		k.started++
		if isRestricted(p) {
			k.restricted++
		} else {
			k.unrestricted++
		}
		k.inspected++
		for _, c := range addedCredentials(ctx, p) {
			k.credentials = append(k.credentials, "pod "+p.Name+": "+c)
		}
		pctx, cancel := context.WithCancel(ctx)
		pr = &podRun{name: p.Name, node: node, cancel: cancel}
		k.pods[p.UID] = pr
		k.mu.Unlock()
		go k.run(pctx, p, pr)
		return
	}
	lost := k.lost[pr.node]
	confirm := p.DeletionTimestamp != nil && !pr.confirmed && !lost
	if p.DeletionTimestamp != nil {
		pr.confirmed = pr.confirmed || confirm
	}
	k.mu.Unlock()
	if p.DeletionTimestamp != nil {
		pr.cancel()
		if confirm {
			go k.confirmDeletion(p)
		}
	}
}

func (k *kubelet) kill(uid types.UID) {
	k.mu.Lock()
	pr := k.pods[uid]
	k.mu.Unlock()
	if pr != nil {
		pr.cancel()
	}
}

// confirmDeletion is the kubelet's last word on a deleted pod: its containers are
// stopped, the pod is removed (a delete with grace period 0, bound to its UID).
func (k *kubelet) confirmDeletion(p *corev1.Pod) {
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cp.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		k.errorf("confirming the deletion of pod %s: %v", p.Name, err)
	}
}

// run is one pod's life on its node.
func (k *kubelet) run(ctx context.Context, p *corev1.Pod, pr *podRun) {
	pods := cp.kube.CoreV1().Pods(p.Namespace)
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := pods.Bind(bctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: pr.node},
	}, metav1.CreateOptions{})
	cancel()
	if err != nil {
		if ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			k.errorf("binding pod %s: %v", p.Name, err)
		}
		return
	}
	for k.holding(p) {
		if sleepCtx(ctx, 50*time.Millisecond) != nil {
			return
		}
	}
	k.mu.Lock()
	delay := k.startDelay
	k.mu.Unlock()
	if sleepCtx(ctx, delay) != nil {
		return
	}
	now := metav1.Now()
	if !k.setStatus(ctx, p, func(pod *corev1.Pod) {
		pod.Status.Phase = corev1.PodRunning
		pod.Status.StartTime = &now
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: v1alpha1.RunnerContainerName, Ready: true, Image: pod.Spec.Containers[0].Image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}}
	}) {
		return
	}
	ran, err := k.agent(ctx, p)
	if ctx.Err() != nil {
		return // killed: the pod is being deleted, or its node is gone
	}
	if err != nil && !errors.Is(err, runnerapi.ErrRunnerRemoved) {
		k.errorf("agent of pod %s: %v", p.Name, err)
	}
	code := int32(0)
	if !ran {
		code = 1 // removed before it got a job: the runner process exits non-zero
		if errors.Is(err, runnerapi.ErrRunnerRemoved) {
			// Unregistered by the controller; the controller deletes the pod next.
			return
		}
	}
	k.setStatus(ctx, p, func(pod *corev1.Pod) {
		pod.Status.Phase = corev1.PodSucceeded
		if code != 0 {
			pod.Status.Phase = corev1.PodFailed
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name:  v1alpha1.RunnerContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Completed"}},
		}}
	})
}

// setStatus writes the pod's status as a kubelet does; false if the pod is gone.
func (k *kubelet) setStatus(ctx context.Context, p *corev1.Pod, mutate func(*corev1.Pod)) bool {
	pods := cp.kube.CoreV1().Pods(p.Namespace)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cur, err := pods.Get(sctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != p.UID || cur.DeletionTimestamp != nil {
			return apierrors.NewNotFound(corev1.Resource("pods"), p.Name)
		}
		mutate(cur)
		_, err = pods.UpdateStatus(sctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		if ctx.Err() == nil && !apierrors.IsNotFound(err) {
			k.errorf("updating the status of pod %s: %v", p.Name, err)
		}
		return false
	}
	return true
}

// agent is the runner in the pod: it reports whether it ran a job.
func (k *kubelet) agent(ctx context.Context, p *corev1.Pod) (bool, error) {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	secret, err := cp.kube.CoreV1().Secrets(p.Namespace).Get(sctx, p.Name, metav1.GetOptions{})
	cancel()
	if err != nil {
		return false, fmt.Errorf("reading the runner's Secret: %w", err)
	}
	enc := string(secret.Data[runner.JITConfigKey])
	k.w.secrets.add("JIT config of "+p.Name, enc)
	cfg, err := runnerapi.DecodeConfig(enc)
	if err != nil {
		return false, err
	}
	k.w.secrets.add("runner credential of "+p.Name, cfg.Credential)
	k.w.obs.jitConfig(p.Name, enc)
	c := runnerapi.NewClient(cfg, k.http)
	if _, err := c.Connect(ctx); err != nil {
		return false, err
	}
	for {
		j, err := c.NextJob(ctx, 2*time.Second)
		if err != nil {
			return false, err
		}
		if j == nil {
			continue
		}
		if err := c.StartJob(ctx, j.ID); err != nil {
			return false, err
		}
		k.w.obs.ran(p.Name, j.ID)
		end := time.Now().Add(time.Duration(j.DurationMS) * time.Millisecond)
		for time.Now().Before(end) {
			if err := sleepCtx(ctx, min(time.Second, time.Until(end))); err != nil {
				return true, err
			}
			if err := c.RenewJob(ctx, j.ID); err != nil {
				return true, err
			}
		}
		return true, c.CompleteJob(ctx, j.ID, j.Conclusion)
	}
}

// loseNode stops the node's kubelet and its runners: nothing answers for its pods.
func (k *kubelet) loseNode(node string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lost[node] = true
	var names []string
	for _, pr := range k.pods {
		if pr.node == node {
			pr.cancel()
			names = append(names, pr.name)
		}
	}
	return names
}

// podsOn lists the pods the kubelet placed on node.
func (k *kubelet) podsOn(node string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var names []string
	for _, pr := range k.pods {
		if pr.node == node {
			names = append(names, pr.name)
		}
	}
	return names
}

// isRestricted reports whether a pod meets the restricted Pod Security profile's
// process settings: not root, no privilege escalation, no capabilities, a seccomp
// profile.
func isRestricted(p *corev1.Pod) bool {
	sc := p.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.SeccompProfile == nil {
		return false
	}
	for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
		cs := c.SecurityContext
		if cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation ||
			cs.Capabilities == nil || len(cs.Capabilities.Drop) != 1 || cs.Capabilities.Drop[0] != "ALL" {
			return false
		}
	}
	return true
}

// podSecurity returns how many runner pods were and were not restricted.
func (k *kubelet) podSecurity() (restricted, unrestricted int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restricted, k.unrestricted
}

// podCredentials returns how many runner pods were inspected, and every credential
// one of them carried beyond its own JIT configuration.
func (k *kubelet) podCredentials() (inspected int, found []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.inspected, append([]string(nil), k.credentials...)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
