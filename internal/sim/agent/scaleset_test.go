package agent

import (
	"context"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/actions/scaleset"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gantry-dev/gantry/internal/controller/runner"
	simgithub "github.com/gantry-dev/gantry/internal/sim/github"
)

// A pod made by another controller for a scale set — no Gantry label, the JIT
// configuration in a Secret key of its own naming — runs its scale set's job, and the
// listener sees JobStarted and JobCompleted.
func TestScaleSetRunnerPodOfAnyController(t *testing.T) {
	ctx := t.Context()
	sim := simgithub.New(simgithub.Options{RateLimits: simgithub.RateLimits{Disabled: true}, ActionsPollHold: 200 * time.Millisecond,
		PATs: []simgithub.PAT{{Token: "ghp_agent", Scopes: []string{"admin:org", "repo"}}}})
	t.Cleanup(sim.Close)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	if _, err := sim.CreateOrg(simgithub.OrgSpec{Login: "acme"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.CreateRepo(simgithub.RepoSpec{Owner: "acme", Name: "app"}); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	c, err := scaleset.NewClientWithPersonalAccessToken(scaleset.NewClientWithPersonalAccessTokenConfig{
		GitHubConfigURL: srv.URL + "/acme", PersonalAccessToken: "ghp_agent"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.GetRunnerGroupByName(ctx, scaleset.DefaultRunnerGroup)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := c.CreateRunnerScaleSet(ctx, &scaleset.RunnerScaleSet{Name: "arc-set", RunnerGroupID: g.ID})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.MessageSessionClient(ctx, ss.ID, "listener")
	if err != nil {
		t.Fatal(err)
	}
	job, err := sim.QueueJob(simgithub.JobSpec{Repo: "acme/app", Labels: []string{"arc-set"}, Duration: simgithub.Duration(50 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	// The listener's part: take the JobAvailable, acquire it, acknowledge.
	var last int
	giveUp := time.Now().Add(60 * time.Second)
	next := func() *scaleset.RunnerScaleSetMessage {
		t.Helper()
		for {
			if time.Now().After(giveUp) {
				t.Fatal("timed out waiting for a message")
			}
			m, err := sess.GetMessage(ctx, last, 1)
			if err != nil {
				t.Fatal(err)
			}
			if m != nil {
				last = m.MessageID
				if err := sess.DeleteMessage(ctx, m.MessageID); err != nil {
					t.Fatal(err)
				}
				return m
			}
		}
	}
	m := next()
	if len(m.JobAvailableMessages) != 1 {
		t.Fatalf("first message has %d JobAvailable, want 1", len(m.JobAvailableMessages))
	}
	if _, err := sess.AcquireJobs(ctx, []int64{m.JobAvailableMessages[0].RunnerRequestID}); err != nil {
		t.Fatal(err)
	}
	jit, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "arc-runner"}, ss.ID)
	if err != nil {
		t.Fatal(err)
	}

	a := (&world{t: t, ns: ns, sim: sim, srv: srv}).start(Options{})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "arc-runner-jit"},
		Data: map[string][]byte{"jitToken": []byte(jit.EncodedJITConfig)}}
	optional := false
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "arc-runner", Labels: map[string]string{"app": "arc"}},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "runner", Image: "ghcr.io/actions/actions-runner",
			Env: []corev1.EnvVar{{Name: runner.EnvJITConfig, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "arc-runner-jit"}, Key: "jitToken", Optional: &optional}}}}}}}}
	for _, o := range []client.Object{secret, pod} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pod.Status.Phase = corev1.PodRunning
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}

	seen := map[scaleset.MessageType]bool{}
	for !seen[scaleset.MessageTypeJobCompleted] {
		m := next()
		for _, s := range m.JobStartedMessages {
			if s.RunnerName == "arc-runner" && s.JobID == strconv.FormatInt(job.ID, 10) {
				seen[scaleset.MessageTypeJobStarted] = true
			}
		}
		for _, d := range m.JobCompletedMessages {
			if d.Result == "succeeded" && d.JobID == strconv.FormatInt(job.ID, 10) {
				seen[scaleset.MessageTypeJobCompleted] = true
			}
		}
	}
	if !seen[scaleset.MessageTypeJobStarted] || !seen[scaleset.MessageTypeJobCompleted] {
		t.Fatalf("messages seen %v, want JobStarted and JobCompleted of job %d by arc-runner", seen, job.ID)
	}
	eventually(t, "the runner to exit", func() bool {
		for _, e := range a.Events() {
			if e.Kind == EventExited && e.Pod == "arc-runner" {
				return true
			}
		}
		return false
	})
	if errs := a.Errors(); len(errs) > 0 {
		t.Errorf("agent errors: %v", errs)
	}
	_ = sess.Close(context.Background())
}
