package runner

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/gantry-dev/gantry/api/v1alpha1"
)

// Runner condition types.
const (
	// ConditionOnline is True once GitHub was seen to have the runner online (listed
	// online, or given a job); False, reason WaitingForGitHub, once GitHub was asked
	// (its pod has run for 5 s) and did not list it online. Not set before that.
	ConditionOnline = "Online"
	// ConditionFailed is True when the runner failed; its reason is status.reason.
	ConditionFailed = "Failed"
	// ConditionPodRefused is True while the API server refuses to create the runner's
	// pod; its message is the API server's. It is removed once the pod exists.
	ConditionPodRefused = "PodRefused"
	// ConditionDraining is True while the runner, running a job, holds up the drain of
	// its node (cordoned, or tainted by an autoscaler about to remove it): set when the
	// runner is first seen there, its LastTransitionTime the start of
	// disruption.drainTimeout. Removed if the node is uncordoned (drain.go).
	ConditionDraining = "Draining"
)

const (
	// configRetry is how often a runner waiting on its pool's configuration looks again.
	configRetry = 30 * time.Second
	// busyRetry is how often a deleted runner that GitHub says is busy is asked about again.
	busyRetry = 15 * time.Second
	// podRefusedRetry is how often a pod the API server refused is created again.
	podRefusedRetry = 10 * time.Second
)

func equalStatus(a, b v1alpha1.RunnerStatus) bool { return equality.Semantic.DeepEqual(a, b) }
