package runnerpool

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/demand"
)

func TestRecentRepositories(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	repo := func(name string) demand.Repo { return demand.Repo{Host: "github.com", Owner: "acme", Name: name} }
	tests := []struct {
		name   string
		stored []v1alpha1.RepositoryActivity
		seen   map[demand.Repo]time.Time
		want   []v1alpha1.RepositoryActivity
	}{
		{name: "nothing", want: nil},
		{
			name:   "after a restart the stored ones are kept",
			stored: []v1alpha1.RepositoryActivity{{Name: "acme/api", LastJobAt: at(time.Hour)}},
			want:   []v1alpha1.RepositoryActivity{{Name: "acme/api", LastJobAt: at(time.Hour)}},
		},
		{
			name:   "the Tracker's newer time wins; newest first",
			stored: []v1alpha1.RepositoryActivity{{Name: "acme/api", LastJobAt: at(time.Hour)}, {Name: "acme/web", LastJobAt: at(30 * time.Minute)}},
			seen:   map[demand.Repo]time.Time{repo("api"): now.Add(-time.Minute)},
			want:   []v1alpha1.RepositoryActivity{{Name: "acme/api", LastJobAt: at(time.Minute)}, {Name: "acme/web", LastJobAt: at(30 * time.Minute)}},
		},
		{
			name:   "two hours old is forgotten",
			stored: []v1alpha1.RepositoryActivity{{Name: "acme/old", LastJobAt: at(2 * time.Hour)}},
			seen:   map[demand.Repo]time.Time{repo("new"): now},
			want:   []v1alpha1.RepositoryActivity{{Name: "acme/new", LastJobAt: at(0)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := recentRepositories(tt.stored, tt.seen, now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("recentRepositories (-want +got):\n%s", diff)
			}
		})
	}

	seen := map[demand.Repo]time.Time{}
	for i := range 150 {
		seen[demand.Repo{Host: "github.com", Owner: "acme", Name: string(rune('a'+i%26)) + string(rune('a'+i/26))}] = now.Add(-time.Duration(i) * time.Second)
	}
	if got := recentRepositories(nil, seen, now); len(got) != maxRecentRepositories || !got[0].LastJobAt.Equal(&metav1.Time{Time: now}) {
		t.Errorf("150 repositories: kept %d, the first at %s; want %d, the newest first", len(got), got[0].LastJobAt, maxRecentRepositories)
	}
}

// A pool does not retire runners before the demand is rebuilt after a start: they may
// be there for jobs the previous controller knew of.
func TestNoRetirementBeforeDemandIsRebuilt(t *testing.T) {
	tracker := demand.NewTracker(demand.NewRouter(), clocktesting.NewFakeClock(time.Now()))
	pool := &v1alpha1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "p"}, Spec: v1alpha1.RunnerPoolSpec{MaxRunners: 10}}
	pending := runnerAt("pending", v1alpha1.RunnerPending, 1, time.Minute)
	pending.Namespace = "ci"
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pending.DeepCopy()).Build()
	r := &Reconciler{Client: c, Tracker: tracker, Clock: clocktesting.NewFakeClock(time.Now())}
	scale := func() (*state, reconcile.Result, error) {
		runners := []v1alpha1.Runner{pending}
		st := &state{pool: pool, runners: runners, tracked: r.snapshot(types.NamespacedName{Namespace: "ci", Name: "p"}, runners)}
		st.rebuilt = st.tracked.Rebuilt
		st.count(0)
		res, err := r.scale(t.Context(), st)
		return st, res, err
	}
	st, res, err := scale()
	if err != nil || st.retired != 0 || res.RequeueAfter == 0 {
		t.Errorf("before the rebuild: retired %d, requeue %s, error %v; want none retired and a requeue", st.retired, res.RequeueAfter, err)
	}
	tracker.MarkRebuilt()
	if st, _, err := scale(); err != nil || st.retired != 1 {
		t.Errorf("after the rebuild: retired %d, error %v; want the pending runner retired", st.retired, err)
	}
}
