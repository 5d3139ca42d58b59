package runner

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

func cachedRunner(uid types.UID, rv string, deleting bool) *v1alpha1.Runner {
	rn := &v1alpha1.Runner{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "linux-abcde", UID: uid, ResourceVersion: rv}}
	if deleting {
		rn.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	}
	return rn
}

// A reconcile is held back exactly while the cache shows the Runner as it was before
// this controller's last write to it, and never longer than ownWriteTTL.
func TestOwnWritesHoldBackOnlyAStaleRunner(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type step struct {
		what       string
		record     func(o *ownWrites) // a write, before the check
		cached     *v1alpha1.Runner
		at         time.Duration
		wantBehind bool
	}
	tests := []struct {
		name  string
		steps []step
	}{{
		name: "nothing written",
		steps: []step{
			{what: "first look", cached: cachedRunner("u1", "5", false), wantBehind: false},
		},
	}, {
		name: "status patch, then the cache catches up",
		steps: []step{
			{what: "cache still at the patch's base", record: func(o *ownWrites) { o.wrote(cachedRunner("u1", "6", false), "5", t0) },
				cached: cachedRunner("u1", "5", false), wantBehind: true},
			{what: "cache has the patch", cached: cachedRunner("u1", "6", false), wantBehind: false},
			{what: "the entry was cleared: an older version later is not held back", cached: cachedRunner("u1", "5", false), wantBehind: false},
		},
	}, {
		name: "deleted, then the deletion shows",
		steps: []step{
			{what: "status patched and deleted; cache has the patch only", record: func(o *ownWrites) {
				o.wrote(cachedRunner("u1", "6", false), "5", t0)
				o.deleted(cachedRunner("u1", "6", false), t0)
			}, cached: cachedRunner("u1", "6", false), wantBehind: true},
			{what: "the deletion shows: finalize may run", cached: cachedRunner("u1", "7", true), wantBehind: false},
		},
	}, {
		name: "finalized: held back until the Runner is gone",
		steps: []step{
			{what: "finalizer removed", record: func(o *ownWrites) { o.finalized(cachedRunner("u1", "8", true), t0) },
				cached: cachedRunner("u1", "7", true), wantBehind: true},
			{what: "even at a newer version", cached: cachedRunner("u1", "9", true), wantBehind: true},
		},
	}, {
		name: "another Runner of the same name is not held back",
		steps: []step{
			{what: "old UID finalized", record: func(o *ownWrites) { o.finalized(cachedRunner("u1", "8", true), t0) },
				cached: cachedRunner("u2", "1", false), wantBehind: false},
		},
	}, {
		name: "never longer than the TTL",
		steps: []step{
			{what: "within the TTL", record: func(o *ownWrites) { o.wrote(cachedRunner("u1", "6", false), "5", t0) },
				cached: cachedRunner("u1", "5", false), at: ownWriteTTL, wantBehind: true},
			{what: "past the TTL", cached: cachedRunner("u1", "5", false), at: ownWriteTTL + time.Millisecond, wantBehind: false},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o ownWrites
			for _, st := range tt.steps {
				if st.record != nil {
					st.record(&o)
				}
				if got := o.behind(st.cached, t0.Add(st.at)); got != st.wantBehind {
					t.Errorf("%s: behind = %v, want %v", st.what, got, st.wantBehind)
				}
			}
		})
	}
}

// forget drops a gone Runner's entry, so entries do not outlive their Runners.
func TestOwnWritesForget(t *testing.T) {
	var o ownWrites
	rn := cachedRunner("u1", "8", true)
	o.finalized(rn, time.Unix(1000, 0))
	o.forget(runnerKey(rn))
	if len(o.m) != 0 {
		t.Fatalf("%d entries after forget, want 0", len(o.m))
	}
}
