package runnerpool

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// ReasonRecovered is the reason of the Normal event a pool gets when it stops being
// Degraded.
const ReasonRecovered = "Recovered"

// recordEvents tells the pool's owner, in `kubectl describe runnerpool`, when the pool
// stops making progress and when it resumes: a Warning event (reason: the Degraded
// condition's) when Degraded turns True or its reason changes, a Normal Recovered
// event when it turns False. Only transitions between the stored status and the new
// one are recorded, so a pool that stays Degraded does not flood the event stream and
// a restart does not repeat an event.
func (r *Reconciler) recordEvents(before, after *v1alpha1.RunnerPool) {
	was := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.ConditionDegraded)
	now := meta.FindStatusCondition(after.Status.Conditions, v1alpha1.ConditionDegraded)
	if now == nil {
		return
	}
	wasDegraded := was != nil && was.Status == metav1.ConditionTrue
	switch {
	case now.Status == metav1.ConditionTrue && (!wasDegraded || was.Reason != now.Reason):
		r.Events.Eventf(after, nil, corev1.EventTypeWarning, now.Reason, "Scale", "%s", now.Message)
	case now.Status != metav1.ConditionTrue && wasDegraded:
		r.Events.Eventf(after, nil, corev1.EventTypeNormal, ReasonRecovered, "Scale",
			"the pool is no longer degraded (it was %s): runners are created again", was.Reason)
	}
}
