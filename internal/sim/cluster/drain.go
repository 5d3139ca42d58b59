package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A drain, as `kubectl drain --ignore-daemonsets --delete-emptydir-data NODE` does it:
// cordon the node, then evict every pod on it through the eviction API in parallel — an
// eviction a PodDisruptionBudget refuses (429) is retried after a delay until it is
// accepted or the drain's timeout — and wait until each evicted pod is gone. The
// algorithm is k8s.io/kubectl's pkg/drain (v0.37.0: RunCordonOrUncordon, RunNodeDrain,
// Helper.evictPods, waitForDelete) with kubectl's defaults (EvictErrorRetryDelay 5 s,
// the pods' own grace period, a 1 s poll of each evicted pod). It is played here rather
// than imported: pkg/drain pulls in k8s.io/cli-runtime and kustomize through
// kubectl's cmd/util, 35 MB more in the one gantry binary, for a simulator feature.

// DrainOptions are the flags of a drain.
type DrainOptions struct {
	// Timeout bounds the drain from its start (kubectl drain --timeout); 0: no bound.
	Timeout time.Duration
	// GracePeriod, when set, overrides the pods' terminationGracePeriodSeconds
	// (--grace-period); nil: their own.
	GracePeriod *time.Duration
	// RetryDelay is how long a refused eviction waits before it is tried again
	// (default 5 s, kubectl's).
	RetryDelay time.Duration
}

// DrainRecord is what a drain did, read from the API server as it went.
type DrainRecord struct {
	Node     string    `json:"node"`
	Started  time.Time `json:"started"`
	Cordoned time.Time `json:"cordoned"`
	// Finished is when the last pod was gone, or when the drain gave up.
	Finished time.Time `json:"finished"`
	// TimedOut: the drain's timeout came before every pod was gone.
	TimedOut bool   `json:"timed_out,omitempty"`
	Error    string `json:"error,omitempty"`
	// Pods are the pods the drain evicted, in the order it listed them.
	Pods []DrainedPod `json:"pods"`
}

// DrainedPod is one pod of a drain.
type DrainedPod struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Refused is how many evictions a disruption budget refused (429); the drain
	// waited for the pod when it is above 0.
	Refused int `json:"refused"`
	// Evicted is when an eviction was accepted (zero when none was: the pod went by
	// itself, or someone else deleted it, while the drain waited); Gone when the drain
	// saw it gone.
	Evicted time.Time `json:"evicted,omitzero"`
	Gone    time.Time `json:"gone,omitzero"`
}

// WaitedFor reports whether the drain had to wait for the pod: a budget refused it.
func (p DrainedPod) WaitedFor() bool { return p.Refused > 0 }

// Drain drains node: cordon, then evict every pod and wait for them to be gone. It
// returns what it did, also when it failed or timed out.
func (c *Cluster) Drain(ctx context.Context, node string, opts DrainOptions) (DrainRecord, error) {
	rec := DrainRecord{Node: node, Started: time.Now()}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = 5 * time.Second
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	finish := func(err error) (DrainRecord, error) {
		rec.Finished = time.Now()
		if err != nil {
			rec.TimedOut = errors.Is(err, context.DeadlineExceeded)
			rec.Error = err.Error()
		}
		return rec, err
	}
	if err := c.Cordon(ctx, node, true); err != nil {
		return finish(err)
	}
	rec.Cordoned = time.Now()
	pods, err := c.podsToEvict(ctx, node)
	if err != nil {
		return finish(err)
	}
	kube, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return finish(err)
	}
	rec.Pods = make([]DrainedPod, len(pods))
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		rec.Pods[i] = DrainedPod{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		wg.Go(func() { errs[i] = c.evict(ctx, kube, p, opts, &rec.Pods[i]) })
	}
	wg.Wait()
	return finish(errors.Join(errs...))
}

// Cordon marks node unschedulable (or schedulable again), as kubectl's cordon helper
// does with a merge patch of spec.unschedulable.
func (c *Cluster) Cordon(ctx context.Context, node string, unschedulable bool) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
	if err := c.Client.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("cordoning node %s: %w", node, err)
	}
	return nil
}

// podsToEvict lists the pods bound to node that a drain evicts: all but mirror pods and
// DaemonSet pods (--ignore-daemonsets), and those already being deleted are waited for
// too (kubectl's filters: pods with emptyDir volumes go, --delete-emptydir-data; a pod
// no controller owns would need --force, which this drain does not pass).
func (c *Cluster) podsToEvict(ctx context.Context, node string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := c.Client.List(ctx, &list, podsOn(node)); err != nil {
		return nil, fmt.Errorf("listing the pods on node %s: %w", node, err)
	}
	var out []corev1.Pod
	var unmanaged []string
	for _, p := range list.Items {
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		ref := metav1.GetControllerOf(&p)
		finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		switch {
		case ref != nil && ref.Kind == "DaemonSet" && ref.APIVersion == "apps/v1" && !finished:
			continue
		case ref == nil && !finished:
			unmanaged = append(unmanaged, p.Namespace+"/"+p.Name)
			continue
		}
		out = append(out, p)
	}
	if len(unmanaged) > 0 {
		return nil, fmt.Errorf("cannot delete pods that declare no controller (use --force to override): %v", unmanaged)
	}
	return out, nil
}

// evict evicts p until an eviction is accepted (a 429 is retried after RetryDelay),
// then waits until p is gone, recording both in rec.
func (c *Cluster) evict(ctx context.Context, kube kubernetes.Interface, p corev1.Pod, opts DrainOptions, rec *DrainedPod) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
	if opts.GracePeriod != nil {
		secs := int64(opts.GracePeriod.Seconds())
		ev.DeleteOptions = &metav1.DeleteOptions{GracePeriodSeconds: &secs}
	}
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		err := kube.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
		switch {
		case err == nil:
			rec.Evicted = time.Now()
		case apierrors.IsNotFound(err):
			rec.Gone = time.Now()
			return nil
		case apierrors.IsTooManyRequests(err):
			rec.Refused++
			select {
			case <-ctx.Done():
				return fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, ctx.Err())
			case <-time.After(opts.RetryDelay):
			}
			// kubectl reads the pod again: a new pod of the same name is not ours.
			fresh := &corev1.Pod{}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(&p), fresh); apierrors.IsNotFound(err) || (err == nil && fresh.UID != p.UID) {
				rec.Gone = time.Now()
				return nil
			}
			continue
		default:
			return fmt.Errorf("evicting pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		break
	}
	for {
		got := &corev1.Pod{}
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(&p), got)
		if apierrors.IsNotFound(err) || (err == nil && got.UID != p.UID) {
			rec.Gone = time.Now()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for pod %s/%s to go: %w", p.Namespace, p.Name, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// WaitedFor are the pods of the drain a budget held, by name.
func (r DrainRecord) WaitedFor() []string {
	var out []string
	for _, p := range r.Pods {
		if p.WaitedFor() {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out
}
