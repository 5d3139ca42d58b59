package v1alpha1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The default labels a runner registers, as config.sh registers them on a classic
// self-hosted runner (GitHub's names; GitHub compares labels case-insensitively).
const (
	LabelSelfHosted = "self-hosted"
	LabelOSLinux    = "linux"
	LabelOSWindows  = "windows"
	LabelOSMacOS    = "macOS"
	LabelArchX64    = "x64"
	LabelArchARM64  = "ARM64"
	LabelArchARM    = "ARM"
)

// Node labels the OS and architecture of a runner pod are read from and pinned with.
const (
	NodeLabelOS   = corev1.LabelOSStable   // kubernetes.io/os
	NodeLabelArch = corev1.LabelArchStable // kubernetes.io/arch
)

// Where neither the template nor the cluster's nodes say otherwise, a runner pod runs on
// linux/amd64; among nodes of several kinds, these are preferred.
const (
	DefaultNodeOS   = "linux"
	DefaultNodeArch = "amd64"
)

// PlatformSource says where a pool's platform (status.platform) comes from.
// +kubebuilder:validation:Enum=Template;Nodes;Default
type PlatformSource string

const (
	// PlatformFromTemplate: the template names both the OS and the architecture (its
	// kubernetes.io/os and kubernetes.io/arch nodeSelector, spec.os.name, or a required
	// node affinity allowing one value).
	PlatformFromTemplate PlatformSource = "Template"
	// PlatformFromNodes: what the template leaves open was read from the Ready nodes the
	// pool's pods can be scheduled on.
	PlatformFromNodes PlatformSource = "Nodes"
	// PlatformDefault: no such node was seen; linux and amd64 stand for what the template
	// leaves open until one is.
	PlatformDefault PlatformSource = "Default"
)

// PlatformStatus is the OS and architecture a pool's runner pods are pinned to and
// register as labels, and why.
type PlatformStatus struct {
	// os is the kubernetes.io/os value the runner pods are pinned to: linux, windows or
	// darwin (registered as linux, windows or macOS).
	// +kubebuilder:validation:MaxLength=63
	OS string `json:"os"`

	// arch is the kubernetes.io/arch value the runner pods are pinned to: amd64, arm64 or
	// arm (registered as x64, ARM64 or ARM).
	// +kubebuilder:validation:MaxLength=63
	Arch string `json:"arch"`

	// source is where they come from: Template, Nodes (the Ready nodes the pool's pods
	// can be scheduled on) or Default (no such node seen: linux/amd64).
	Source PlatformSource `json:"source"`

	// message says how they were chosen, in words.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// observedGeneration is the pool's generation when they were chosen. A platform read
	// from the nodes is read again only when the spec changes (or while none was seen),
	// not as nodes come and go: a node group scaled to zero does not change the labels.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// osLabels and archLabels map Kubernetes' node OS and architecture names (Go's GOOS and
// GOARCH) to GitHub's runner labels. Other values are refused at admission.
var (
	osLabels   = map[string]string{"linux": LabelOSLinux, "windows": LabelOSWindows, "darwin": LabelOSMacOS}
	archLabels = map[string]string{"amd64": LabelArchX64, "arm64": LabelArchARM64, "arm": LabelArchARM}
)

// RunnerOSLabel and RunnerArchLabel return GitHub's label for a node OS or architecture
// (linux → linux, amd64 → x64, arm64 → ARM64), or "" for one the runner does not run on.
func RunnerOSLabel(os string) string     { return osLabels[os] }
func RunnerArchLabel(arch string) string { return archLabels[arch] }

// TemplatePlatform returns the OS and architecture the pool's template itself pins its
// pods to, "" where it leaves them open. The OS: the kubernetes.io/os nodeSelector, else
// spec.os.name, else a required node affinity that allows one value; the architecture:
// the kubernetes.io/arch nodeSelector, else such an affinity.
func (s *RunnerPoolSpec) TemplatePlatform() (os, arch string) {
	pod := &s.Template.Spec
	sel := pod.NodeSelector
	switch {
	case sel[NodeLabelOS] != "":
		os = sel[NodeLabelOS]
	case pod.OS != nil && pod.OS.Name != "":
		os = string(pod.OS.Name)
	default:
		os = requiredAffinityValue(pod.Affinity, NodeLabelOS)
	}
	arch = sel[NodeLabelArch]
	if arch == "" {
		arch = requiredAffinityValue(pod.Affinity, NodeLabelArch)
	}
	return os, arch
}

// requiredAffinityValue returns the one value a required node affinity allows for key:
// every term has a key In [value] requirement, with the same single value. Otherwise "".
func requiredAffinityValue(aff *corev1.Affinity, key string) string {
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	value := ""
	for _, t := range terms {
		v := ""
		for _, r := range t.MatchExpressions {
			if r.Key == key && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
				v = r.Values[0]
			}
		}
		if v == "" || (value != "" && v != value) {
			return ""
		}
		value = v
	}
	return value
}

// Platform returns the OS and architecture of the pool's runner pods: what the template
// pins (TemplatePlatform), else what status.platform recorded (chosen from the cluster's
// nodes by the RunnerPool controller), else linux and amd64. The pod builder pins the pod
// to what the template does not (PinPlatform), so the labels the runner registers are true.
func (p *RunnerPool) Platform() (os, arch string) {
	os, arch = p.Spec.TemplatePlatform()
	if st := p.Status.Platform; st != nil {
		if os == "" {
			os = st.OS
		}
		if arch == "" {
			arch = st.Arch
		}
	}
	if os == "" {
		os = DefaultNodeOS
	}
	if arch == "" {
		arch = DefaultNodeArch
	}
	return os, arch
}

// RunnerLabels returns the labels each of the pool's runners registers with GitHub, in
// both registration modes, and the labels the router matches a job's runs-on against:
// self-hosted, the OS and the architecture label of Platform (unless noDefaultLabels),
// then the pool's labels; each once, compared case-insensitively, first spelling kept.
func (p *RunnerPool) RunnerLabels() []string {
	s := &p.Spec
	out := make([]string, 0, len(s.Labels)+3)
	add := func(l string) {
		if l == "" {
			return
		}
		for _, o := range out {
			if strings.EqualFold(o, l) {
				return
			}
		}
		out = append(out, l)
	}
	if !s.NoDefaultLabels {
		os, arch := p.Platform()
		add(LabelSelfHosted)
		add(osLabels[os])
		add(archLabels[arch])
	}
	for _, l := range s.Labels {
		add(strings.TrimSpace(l))
	}
	return out
}

// PinPlatform adds to a runner pod's nodeSelector the OS and architecture its runner
// registers as labels (Platform), where the pool's template does not pin them itself: a
// label never lies about the machine. A pool with noDefaultLabels registers neither, and
// its pods are left as the template has them.
func (p *RunnerPool) PinPlatform(pod *corev1.PodSpec) {
	if p.Spec.NoDefaultLabels {
		return
	}
	os, arch := p.Platform()
	if pod.NodeSelector == nil {
		pod.NodeSelector = map[string]string{}
	}
	if pod.NodeSelector[NodeLabelOS] == "" {
		pod.NodeSelector[NodeLabelOS] = os
	}
	if pod.NodeSelector[NodeLabelArch] == "" {
		pod.NodeSelector[NodeLabelArch] = arch
	}
}
