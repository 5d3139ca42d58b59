package reliability

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// Stuck pods: three pools whose templates are broken the common ways — the runner names
// a Secret that does not exist, a Docker-in-Docker sidecar's image never pulls, a volume
// never attaches. The kubelet keeps their pods as a real one would (waiting with
// CreateContainerConfigError, ImagePullBackOff, ContainerCreating). Jobs queue for each.
// No runner may hold a slot past pendingTimeout: each fails with its reason, is
// replaced, and the pool turns Degraded and backs off. Then each template is fixed, and
// every job runs.
func TestStuckPods(t *testing.T) {
	t.Parallel()
	s := scale()
	w := newWorld(t, worldOptions{})
	w.controller("replica-0", nil)
	w.leader(60 * time.Second)

	const (
		pendingTimeout = 4 * time.Second
		grace          = 2 * time.Second
		// slack is the controller's own latency on a loaded machine: a runner counts as
		// holding a slot past pendingTimeout only once it is this much later.
		slack = 5 * time.Second
	)
	type stuckPool struct {
		name, reason string
		// brokenBy reports whether a pod was made from the broken template.
		brokenBy func(*corev1.Pod) bool
		// stuck writes what a kubelet writes for such a pod.
		stuck func(*corev1.Pod)
		// breakIt breaks a template; the fix is the pool's template before it.
		breakIt func(*corev1.PodSpec)
	}
	waiting := func(reason, msg string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}
	cases := []stuckPool{{
		name: "stuck-secret", reason: v1alpha1.ReasonContainerConfigError,
		breakIt: func(spec *corev1.PodSpec) {
			spec.Containers[0].Env = append(spec.Containers[0].Env, corev1.EnvVar{Name: "REGISTRY_TOKEN", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "no-such-secret"}, Key: "token"}}})
		},
		brokenBy: func(p *corev1.Pod) bool {
			for _, e := range p.Spec.Containers[0].Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == "no-such-secret" {
					return true
				}
			}
			return false
		},
		stuck: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: v1alpha1.RunnerContainerName,
				State: waiting("CreateContainerConfigError", `secret "no-such-secret" not found`)}}
		},
	}, {
		name: "stuck-sidecar", reason: v1alpha1.ReasonImagePullFailed,
		breakIt: func(spec *corev1.PodSpec) {
			spec.InitContainers = append(spec.InitContainers, corev1.Container{Name: "dind", Image: "docker:never-pulls",
				RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
		},
		brokenBy: func(p *corev1.Pod) bool { return len(p.Spec.InitContainers) > 0 },
		stuck: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "dind",
				State: waiting("ImagePullBackOff", `Back-off pulling image "docker:never-pulls"`)}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: v1alpha1.RunnerContainerName, State: waiting("PodInitializing", "")}}
		},
	}, {
		name: "stuck-volume", reason: v1alpha1.ReasonPendingTimeout,
		breakIt: func(spec *corev1.PodSpec) {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "never-attaches"}}})
			spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "cache", MountPath: "/cache"})
		},
		brokenBy: func(p *corev1.Pod) bool { return len(p.Spec.Volumes) > 0 && p.Spec.Volumes[0].Name == "cache" },
		stuck: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: v1alpha1.RunnerContainerName, State: waiting("ContainerCreating", "")}}
		},
	}}
	caseOf := func(p *corev1.Pod) *stuckPool {
		for i := range cases {
			if p.Labels[v1alpha1.LabelPool] == cases[i].name && cases[i].brokenBy(p) {
				return &cases[i]
			}
		}
		return nil
	}
	// The kubelet binds the broken pods and never starts them; the loop below writes
	// their stuck status once, as the kubelet would after trying.
	w.kubelet.setHold(func(p *corev1.Pod) bool { return caseOf(p) != nil })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu       sync.Mutex
		written  = map[string]bool{}
		pastSlot = map[string]time.Duration{} // runner → how long past pendingTimeout it held a slot
	)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			var pods corev1.PodList
			if err := cp.c.List(ctx, &pods, client.InNamespace(w.ns)); err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					c := caseOf(p)
					if c == nil || p.Spec.NodeName == "" || p.DeletionTimestamp != nil {
						continue
					}
					mu.Lock()
					done := written[p.Name]
					written[p.Name] = true
					mu.Unlock()
					if !done {
						w.kubelet.setStatus(ctx, p, c.stuck)
					}
				}
			}
			var runners v1alpha1.RunnerList
			if err := cp.c.List(ctx, &runners, client.InNamespace(w.ns)); err == nil {
				for _, r := range runners.Items {
					// No phase yet is pending too: a new runner's status is written with
					// its first change.
					if (r.Status.Phase != "" && r.Status.Phase != v1alpha1.RunnerPending) || !r.DeletionTimestamp.IsZero() {
						continue
					}
					var pod corev1.Pod
					if cp.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: r.Name}, &pod) != nil || caseOf(&pod) == nil {
						continue
					}
					if over := time.Since(pod.CreationTimestamp.Time) - pendingTimeout - slack; over > 0 {
						mu.Lock()
						pastSlot[r.Name] = max(pastSlot[r.Name], over)
						mu.Unlock()
					}
				}
			}
			_ = sleepCtx(ctx, 200*time.Millisecond)
		}
	}()

	jobsPer := 2 * s
	for _, c := range cases {
		pool := w.pool(c.name).Labels("linux", c.name).MaxRunners(int32(2 * jobsPer)).Obj()
		pool.Spec.Recovery = v1alpha1.RecoverySpec{
			PendingTimeout:            &metav1.Duration{Duration: pendingTimeout},
			ImagePullGracePeriod:      &metav1.Duration{Duration: grace},
			ContainerErrorGracePeriod: &metav1.Duration{Duration: grace},
		}
		c.breakIt(&pool.Spec.Template.Spec)
		w.create(pool)
		for range jobsPer {
			if _, err := w.sim.QueueJob(simgithub.JobSpec{Repo: org + "/" + repos[0], Labels: []string{"self-hosted", "linux", c.name},
				Duration: simgithub.Duration(time.Second), Workflow: "stuck"}); err != nil {
				t.Fatal(err)
			}
		}
		w.fig.addJobs(jobsPer)
	}
	brokenAt := time.Now()

	// Each pool's runners fail with their reason; three in a row make it Degraded.
	for _, c := range cases {
		w.eventually(c.name+" runners failing as "+c.reason+" and the pool Degraded", 2*time.Minute, func() bool {
			cond := meta.FindStatusCondition(w.getPool(c.name).Status.Conditions, v1alpha1.ConditionDegraded)
			return w.failedWith(c.reason) >= 3 && cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == v1alpha1.ReasonRunnerFailures
		})
		w.fig.fault(fault{Kind: "template broken: " + c.name, Count: w.failedWith(c.reason), Survived: !t.Failed(),
			Detail: fmt.Sprintf("runners failed as %s within pendingTimeout %s (grace %s), replaced; the pool Degraded and backing off", c.reason, pendingTimeout, grace)})
	}
	w.fig.measure("stuck_broken_to_degraded_seconds", round(time.Since(brokenAt).Seconds()))

	// Fix each template: new pods start; every job runs.
	for _, c := range cases {
		p := w.getPool(c.name)
		before := p.DeepCopy()
		fresh := w.pool(c.name).Obj()
		p.Spec.Template = fresh.Spec.Template
		if err := cp.c.Patch(context.Background(), p, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	fixedAt := time.Now()
	w.eventually("every job of the fixed pools to run", 4*time.Minute, w.jobsDone)
	w.fig.measure("stuck_fixed_to_all_jobs_done_seconds", round(time.Since(fixedAt).Seconds()))
	cancel()
	wg.Wait()

	mu.Lock()
	w.fig.measure("stuck_runners_past_pending_timeout", float64(len(pastSlot)))
	for name, over := range pastSlot {
		t.Errorf("runner %s held a slot %s past pendingTimeout %s (+%s slack)", name, over.Round(time.Second), pendingTimeout, slack)
	}
	mu.Unlock()
	w.finish(time.Minute)
}
