package demand

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestSnapshotReposAndRebuilt(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	router := NewRouter()
	pool := types.NamespacedName{Namespace: "ci", Name: "org"}
	router.SetPool(Pool{Key: pool, Kind: ScopeOrganization, Host: "github.com", Owner: "acme", Labels: []string{"self-hosted", "linux", "x64"}})
	tr := NewTracker(router, clk)
	if tr.Rebuilt() || tr.Snapshot(pool, nil).Rebuilt {
		t.Fatal("a new Tracker says its demand was rebuilt")
	}
	job := func(id int64, repo string) Job {
		return Job{ID: id, Host: "github.com", Owner: "acme", Repo: repo, Labels: []string{"self-hosted", "linux"}}
	}
	tr.Observe(JobEvent{Action: ActionQueued, Job: job(1, "api")})
	clk.Step(time.Minute)
	tr.Observe(JobEvent{Action: ActionQueued, Job: job(2, "web")})
	clk.Step(time.Minute)
	tr.Observe(JobEvent{Action: ActionCompleted, Job: job(1, "api")}) // finished jobs still count
	tr.Observe(JobEvent{Action: ActionQueued, Job: Job{ID: 3, Host: "github.com", Owner: "other", Repo: "x", Labels: []string{"linux"}}})
	want := map[Repo]time.Time{
		{Host: "github.com", Owner: "acme", Name: "api"}: clk.Now(),
		{Host: "github.com", Owner: "acme", Name: "web"}: clk.Now().Add(-time.Minute),
	}
	if diff := cmp.Diff(want, tr.Snapshot(pool, nil).Repos); diff != "" {
		t.Errorf("Snapshot's Repos (-want +got):\n%s", diff)
	}
	tr.MarkRebuilt()
	if !tr.Rebuilt() || !tr.Snapshot(pool, nil).Rebuilt {
		t.Error("MarkRebuilt did not stick")
	}
}
