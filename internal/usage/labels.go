package usage

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
)

// Label values of the usage metrics that are not a repository or a workflow: Other for
// those past the cap, None for a runner's time without a job. Neither is an OWNER/REPO,
// so neither is ever a repository's.
const (
	Other = "other"
	None  = "none"
)

// Bounded hands out label values from an unbounded set — repositories, workflows —
// keeping at most max distinct ones: the first max values it is asked for are theirs
// for the life of the process, every later one is Other. Series are bounded by max
// whatever the organization's size. The zero value keeps none. It is safe for
// concurrent use.
type Bounded struct {
	max  int
	mu   sync.Mutex
	kept map[string]struct{}
}

// NewBounded returns a Bounded keeping up to max values (0: none, every value Other).
func NewBounded(max int) *Bounded { return &Bounded{max: max, kept: map[string]struct{}{}} }

// Value is v, if it is kept or there is room to keep it, else Other.
func (b *Bounded) Value(v string) string {
	if b == nil {
		return Other
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.kept[v]; ok {
		return v
	}
	if len(b.kept) >= b.max {
		return Other
	}
	if b.kept == nil {
		b.kept = map[string]struct{}{}
	}
	b.kept[v] = struct{}{}
	return v
}

// Kept is how many values are kept.
func (b *Bounded) Kept() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.kept)
}

// Pod labels and annotations a pool with spec.usage.podLabels puts on its runner pods
// once their runner takes a job, for cost tools (OpenCost, Kubecost) that group pods by
// label. The labels hold LabelValue's form; the annotations the exact values.
const (
	PodLabelRepository = "gantry.dev/repository"
	PodLabelWorkflow   = "gantry.dev/workflow"
)

// maxLabelValue is Kubernetes' limit on a label value.
const maxLabelValue = 63

// RepositoryLabelValue is LabelValue of a repository OWNER/REPO written OWNER.REPO:
// GitHub owners have no dot, so the first dot splits it back.
func RepositoryLabelValue(repo string) string { return LabelValue(strings.Replace(repo, "/", ".", 1)) }

// LabelValue makes s a valid Kubernetes label value (at most 63 characters of
// [A-Za-z0-9._-], starting and ending alphanumeric), as close to s as can be: any other
// character becomes "-", runs of them one; and a value too long keeps its first 54
// characters and a hash of the whole, so that two long names stay apart. "" stays "".
func LabelValue(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range s {
		ok := c < 128 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-')
		if !ok {
			if !dash {
				b.WriteByte('-')
			}
			dash = true
			continue
		}
		dash = false
		b.WriteRune(c)
	}
	v := trimToAlnum(b.String())
	if len(v) > maxLabelValue {
		sum := sha256.Sum256([]byte(s))
		v = trimToAlnum(v[:maxLabelValue-9]) + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return v
}

func trimToAlnum(s string) string {
	return strings.TrimFunc(s, func(c rune) bool { return c == '.' || c == '_' || c == '-' })
}
