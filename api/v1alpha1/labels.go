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

// Where a template pins neither, a runner pod runs on linux/amd64.
const (
	DefaultNodeOS   = "linux"
	DefaultNodeArch = "amd64"
)

// osLabels and archLabels map Kubernetes' node OS and architecture names (Go's GOOS and
// GOARCH) to GitHub's runner labels. Other values are refused at admission.
var (
	osLabels   = map[string]string{"linux": LabelOSLinux, "windows": LabelOSWindows, "darwin": LabelOSMacOS}
	archLabels = map[string]string{"amd64": LabelArchX64, "arm64": LabelArchARM64, "arm": LabelArchARM}
)

// Platform returns the OS and architecture of the pool's runner pods: the template's
// kubernetes.io/os nodeSelector, else its spec.os.name, else linux; its
// kubernetes.io/arch nodeSelector, else amd64. The pod builder pins the pod to what the
// template does not (PinPlatform), so the labels the runner registers are true.
func (s *RunnerPoolSpec) Platform() (os, arch string) {
	os, arch = DefaultNodeOS, DefaultNodeArch
	sel := s.Template.Spec.NodeSelector
	switch {
	case sel[NodeLabelOS] != "":
		os = sel[NodeLabelOS]
	case s.Template.Spec.OS != nil && s.Template.Spec.OS.Name != "":
		os = string(s.Template.Spec.OS.Name)
	}
	if sel[NodeLabelArch] != "" {
		arch = sel[NodeLabelArch]
	}
	return os, arch
}

// RunnerLabels returns the labels each of the pool's runners registers with GitHub, in
// both registration modes, and the labels the router matches a job's runs-on against:
// self-hosted, the OS and the architecture label of Platform (unless noDefaultLabels),
// then the pool's labels; each once, compared case-insensitively, first spelling kept.
func (s *RunnerPoolSpec) RunnerLabels() []string {
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
		os, arch := s.Platform()
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
// registers as labels, where the pool's template does not pin them itself: a label
// never lies about the machine. A pool with noDefaultLabels registers neither, and its
// pods are left as the template has them.
func (s *RunnerPoolSpec) PinPlatform(pod *corev1.PodSpec) {
	if s.NoDefaultLabels {
		return
	}
	os, arch := s.Platform()
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
