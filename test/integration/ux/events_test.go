package ux

import (
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller/runnerpool"
)

// A runner that fails says why in a Warning event a person can act on, and a pool
// whose runners keep failing says so on the pool.
func TestRunnerFailureEventsReadWell(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	pool := w.pool("img").MinIdle(3).MaxRunners(3).Obj()
	pool.Spec.Recovery.ImagePullGracePeriod = &metav1.Duration{Duration: time.Second}
	w.create(pool)

	var names []string
	w.eventually("three registered runners with pods", 30*time.Second, func() (bool, error) {
		names = names[:0]
		for _, r := range w.runners("img") {
			if w.hasPod(r.Name) {
				names = append(names, r.Name)
			}
		}
		return len(names) == 3, nil
	})

	w.setPodWaiting(names[0], "InvalidImageName", `couldn't parse image name "UPPER:case"`)
	ev := w.event(names[0], corev1.EventTypeWarning, v1alpha1.ReasonInvalidImageName, 30*time.Second)
	expectMessage(t, ev, `the runner image name is invalid: couldn't parse image name "UPPER:case"; fix template.spec.containers[runner].image`)

	w.setPodWaiting(names[1], "ImagePullBackOff", `Back-off pulling image "ghcr.io/acme/runner:nope"`)
	ev = w.event(names[1], corev1.EventTypeWarning, v1alpha1.ReasonImagePullFailed, 30*time.Second)
	expectMessage(t, ev, `the runner image could not be pulled for 1s: Back-off pulling image "ghcr.io/acme/runner:nope"`)

	w.updatePodStatus(names[2], func(pod *corev1.Pod) {
		pod.Status.Phase = corev1.PodFailed
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name:  v1alpha1.RunnerContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 127, Reason: "Error"}},
		}}
	})
	ev = w.event(names[2], corev1.EventTypeWarning, v1alpha1.ReasonExitedWithoutJob, 30*time.Second)
	expectMessage(t, ev, `the runner container exited with code 127 before running a job; check its logs`)

	// Three in a row: the pool is Degraded and says so on itself.
	ev = w.event("img", corev1.EventTypeWarning, v1alpha1.ReasonRunnerFailures, 30*time.Second)
	expectMessage(t, ev, regexp.MustCompile(`^3 runners failed in a row; the last: ExitedWithoutJob: the runner container exited with code 127 before running a job; check its logs; creating runners again in [0-9]+s$`))
}

// A pool that cannot work says what to fix in a Warning event, and says it recovered
// once it is fixed.
func TestPoolConfigEventsReadWell(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.create(w.pool("nocreds").Credentials("missing").Obj())
	ev := w.event("nocreds", corev1.EventTypeWarning, "CredentialsSecretNotFound", 30*time.Second)
	expectMessage(t, ev, "credentials secret "+w.ns+"/missing not found: create it with github_token, or github_app_id, github_app_installation_id and github_app_private_key")

	w.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "missing"},
		Data:       map[string][]byte{"github_token": []byte(testToken)},
	})
	// The Secret is read at most every 30 s and a broken pool is checked every 30 s.
	ev = w.event("nocreds", corev1.EventTypeNormal, runnerpool.ReasonRecovered, 90*time.Second)
	expectMessage(t, ev, "the pool is no longer degraded (it was CredentialsSecretNotFound): runners are created again")
	p := &v1alpha1.RunnerPool{}
	if err := w.c.Get(w.ctx(), client.ObjectKey{Namespace: w.ns, Name: "nocreds"}, p); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady) {
		t.Errorf("the pool is not Ready after its Secret was created: %+v", p.Status.Conditions)
	}
}

// expectMessage asserts an event's message is want (a string, or a pattern) and that
// it reads well: no formatting debris, Go durations, secrets or trailing punctuation,
// within the 1 KiB an event's note may hold.
func expectMessage(t *testing.T, ev corev1.Event, want any) {
	t.Helper()
	msg := ev.Message
	switch w := want.(type) {
	case string:
		if msg != w {
			t.Errorf("event %s message:\n got %q\nwant %q", ev.Reason, msg, w)
		}
	case *regexp.Regexp:
		if !w.MatchString(msg) {
			t.Errorf("event %s message %q does not match %s", ev.Reason, msg, w)
		}
	}
	for _, bad := range []struct{ what, re string }{
		{"a formatting error", `%!|%[a-z]`},
		{"a Go zero value", `<nil>|&\{|map\[`},
		{"a Go duration (2m0s)", `[0-9]+[hm]0[ms]`},
		{"an empty name", `  |node  | :`},
		{"the credentials", regexp.QuoteMeta(testToken)},
		{"a trailing period or space", `[. ]$`},
	} {
		if regexp.MustCompile(bad.re).MatchString(msg) {
			t.Errorf("event %s message has %s: %q", ev.Reason, bad.what, msg)
		}
	}
	if len(msg) > 1024 {
		t.Errorf("event %s message is %d bytes, over the 1 KiB an event holds", ev.Reason, len(msg))
	}
	if strings.TrimSpace(msg) == "" {
		t.Errorf("event %s has no message", ev.Reason)
	}
	if ev.Source.Component == "" && ev.ReportingController == "" {
		t.Errorf("event %s does not say which controller wrote it", ev.Reason)
	}
}

// A pool that names a runner group GitHub does not have says so on itself — not Ready,
// Degraded, and a Warning event, each with reason RunnerGroupNotFound and a message that
// says what to fix — and creates no runner that could only wait.
func TestMissingRunnerGroupIsExplained(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.create(w.pool("groupless").RunnerGroup("gpu-nodes").MinIdle(1).MaxRunners(1).Obj())
	want := w.simURL + `/acme has no runner group "gpu-nodes": create it on GitHub, or set github.runnerGroup to an existing group`
	ev := w.event("groupless", corev1.EventTypeWarning, v1alpha1.ReasonRunnerGroupNotFound, 30*time.Second)
	expectMessage(t, ev, want)
	p := &v1alpha1.RunnerPool{}
	if err := w.c.Get(w.ctx(), client.ObjectKey{Namespace: w.ns, Name: "groupless"}, p); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonRunnerGroupNotFound || ready.Message != want {
		t.Errorf("Ready condition %+v; want False, %s, %q", ready, v1alpha1.ReasonRunnerGroupNotFound, want)
	}
	if rs := w.runners("groupless"); len(rs) != 0 {
		t.Errorf("%d runners created for a pool whose runner group does not exist", len(rs))
	}
}
