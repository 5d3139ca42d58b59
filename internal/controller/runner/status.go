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
