package runnerpool

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/controller"
	"github.com/gantry-dev/gantry/internal/demand"
)

// setStatus writes the pool's counts and conditions, each computed from the state alone.
func setStatus(s *state, now time.Time, threshold int) {
	st := &s.pool.Status
	st.ObservedGeneration = s.pool.Generation
	st.QueuedJobs = int32(s.demand.Queued)
	st.DesiredRunners = int32(s.desired)
	st.PendingRunners = int32(s.pending + s.expected + s.created)
	st.IdleRunners = int32(s.idle)
	st.BusyRunners = int32(s.busy)
	st.FailedRunners = int32(s.failed)
	st.OutdatedRunners = int32(s.outdated)
	st.TemplateHash = s.templateHash
	st.RecentRepositories = s.recent
	st.Warm = warmStatus(s.pool, s.floor, now)
	for _, c := range []metav1.Condition{
		readyCondition(s),
		scalingUpCondition(s),
		scalingDownCondition(s),
		degradedCondition(s, now, threshold),
	} {
		c.ObservedGeneration = s.pool.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
}

func configReason(err error) (string, string) {
	var cfg *controller.ConfigError
	if errors.As(err, &cfg) {
		return cfg.Reason, cfg.Message
	}
	var down *controller.UnavailableError
	if errors.As(err, &down) {
		return down.Reason, down.Message
	}
	return v1alpha1.ReasonGitHubUnavailable, err.Error()
}

// readyCondition is True only on a real answer from GitHub for the pool's credentials
// and scope (GitHubResolver.Check), and while the API server admits its runner pods.
func readyCondition(s *state) metav1.Condition {
	for _, err := range []error{s.configErr, s.unavailable} {
		if err != nil {
			reason, msg := configReason(err)
			return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
		}
	}
	if s.sourceReason != "" {
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: s.sourceReason, Message: s.sourceMessage}
	}
	if s.refused > 0 {
		// The credentials work, but no runner can start: the pool takes no job.
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPodsRefused,
			Message: fmt.Sprintf("the API server refuses runner pods (%d runners wait for theirs): %s", s.refused, s.refusal)}
	}
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAsExpected,
		Message: "GitHub accepts the pool's credentials for its scope and runner group; the pool takes jobs"}
}

func scalingUpCondition(s *state) metav1.Condition {
	if s.created > 0 || (s.configErr == nil && s.desired > s.active()) {
		return metav1.Condition{Type: v1alpha1.ConditionScalingUp, Status: metav1.ConditionTrue, Reason: "CreatingRunners",
			Message: fmt.Sprintf("%d runners wanted, %d alive", s.desired, s.active()+s.created)}
	}
	return metav1.Condition{Type: v1alpha1.ConditionScalingUp, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAsExpected,
		Message: "no runners to create"}
}

func scalingDownCondition(s *state) metav1.Condition {
	if s.retired > 0 {
		return metav1.Condition{Type: v1alpha1.ConditionScalingDown, Status: metav1.ConditionTrue, Reason: "RetiringRunners",
			Message: fmt.Sprintf("retiring %d idle runners", s.retired)}
	}
	if s.replaced > 0 {
		return metav1.Condition{Type: v1alpha1.ConditionScalingDown, Status: metav1.ConditionTrue, Reason: "ReplacingOutdatedRunners",
			Message: fmt.Sprintf("replacing %d idle or pending runners made from an older template", s.replaced)}
	}
	return metav1.Condition{Type: v1alpha1.ConditionScalingDown, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAsExpected,
		Message: "no runners to retire"}
}

func degradedCondition(s *state, now time.Time, threshold int) metav1.Condition {
	if s.configErr != nil {
		reason, msg := configReason(s.configErr)
		return metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
	}
	if s.refused > 0 {
		return metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPodsRefused,
			Message: fmt.Sprintf("the API server refuses runner pods (%d runners wait for theirs, asked again every 10s): %s", s.refused, s.refusal)}
	}
	if s.floor.invalid != "" {
		return metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonInvalidSchedule,
			Message: s.floor.invalid + "; the pool runs on without these windows until they are fixed"}
	}
	if s.failures.Degraded(threshold) {
		msg := fmt.Sprintf("%d runners failed in a row; the last: %s: %s", s.failures.Consecutive, s.failures.LastReason, s.failures.LastMessage)
		if !s.failures.Until.IsZero() {
			msg += fmt.Sprintf("; creating runners again in %s", s.failures.Until.Sub(now).Round(time.Second))
		}
		return metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRunnerFailures, Message: msg}
	}
	return metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAsExpected,
		Message: "runners start and run jobs"}
}

// Bounds of status.recentRepositories: what resync polls for an organization pool
// after a restart.
const (
	recentRepositoriesTTL = 2 * time.Hour
	maxRecentRepositories = 100
)

// recentRepositories merges the repositories the pool's status remembers with those
// the Tracker routed jobs of to the pool: the latest time of each, none older than
// recentRepositoriesTTL, newest first, at most maxRecentRepositories.
func recentRepositories(stored []v1alpha1.RepositoryActivity, seen map[demand.Repo]time.Time, now time.Time) []v1alpha1.RepositoryActivity {
	latest := map[string]time.Time{}
	for _, ra := range stored {
		latest[strings.ToLower(ra.Name)] = ra.LastJobAt.Time
	}
	for r, at := range seen {
		name := r.Owner + "/" + r.Name
		if at.After(latest[name]) {
			latest[name] = at
		}
	}
	out := make([]v1alpha1.RepositoryActivity, 0, len(latest))
	for name, at := range latest {
		if now.Sub(at) < recentRepositoriesTTL {
			out = append(out, v1alpha1.RepositoryActivity{Name: name, LastJobAt: metav1.NewTime(at.Truncate(time.Second))})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].LastJobAt.Equal(&out[j].LastJobAt) {
			return out[j].LastJobAt.Before(&out[i].LastJobAt)
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > maxRecentRepositories {
		out = out[:maxRecentRepositories]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
