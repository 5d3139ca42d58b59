package api

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gantry-dev/gantry/api/v1alpha1"
	"github.com/gantry-dev/gantry/internal/testutil"
)

// The labels a runner registers must make sense to GitHub and be true of the machine:
// the API server refuses a pool that would register no label, more than GitHub takes,
// or an OS or architecture GitHub has no label for.
func TestLabelValidation(t *testing.T) {
	ns := env.Namespace(t)
	many := make([]string, 98)
	for i := range many {
		many[i] = fmt.Sprintf("l%d", i)
	}
	tests := []struct {
		name    string
		mutate  func(*v1alpha1.RunnerPool)
		wantErr string // "" = accepted
	}{
		{name: "no labels, defaults on", mutate: func(p *v1alpha1.RunnerPool) { p.Spec.Labels = nil }},
		{name: "noDefaultLabels with a label", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.NoDefaultLabels, p.Spec.Labels = true, []string{"secure"}
		}},
		{name: "noDefaultLabels without labels", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.NoDefaultLabels, p.Spec.Labels = true, nil
		}, wantErr: "noDefaultLabels: true needs at least one entry in labels"},
		{name: "98 labels and the defaults", mutate: func(p *v1alpha1.RunnerPool) { p.Spec.Labels = many },
			wantErr: "labels can have at most 97 entries besides the default labels"},
		{name: "98 labels without the defaults", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.NoDefaultLabels, p.Spec.Labels = true, many
		}},
		{name: "arm64 nodes", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.Template.Spec.NodeSelector = map[string]string{v1alpha1.NodeLabelOS: "linux", v1alpha1.NodeLabelArch: "arm64"}
		}},
		{name: "windows by spec.os and nodeSelector", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.Template.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
			p.Spec.Template.Spec.NodeSelector = map[string]string{v1alpha1.NodeLabelOS: "windows"}
		}},
		{name: "an architecture GitHub has no label for", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.Template.Spec.NodeSelector = map[string]string{v1alpha1.NodeLabelArch: "s390x"}
		}, wantErr: "kubernetes.io/arch must be amd64, arm64 or arm"},
		{name: "an OS GitHub has no label for", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.Template.Spec.NodeSelector = map[string]string{v1alpha1.NodeLabelOS: "freebsd"}
		}, wantErr: "kubernetes.io/os must be linux, windows or darwin"},
		{name: "any architecture without the default labels", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.NoDefaultLabels, p.Spec.Labels = true, []string{"mainframe"}
			p.Spec.Template.Spec.NodeSelector = map[string]string{v1alpha1.NodeLabelArch: "s390x"}
		}},
		{name: "spec.os and nodeSelector disagree", mutate: func(p *v1alpha1.RunnerPool) {
			p.Spec.Template.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
			p.Spec.Template.Spec.NodeSelector = map[string]string{v1alpha1.NodeLabelOS: "windows"}
		}, wantErr: "template.spec.os.name and template.spec.nodeSelector kubernetes.io/os disagree"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testutil.RunnerPool(ns, fmt.Sprintf("labels-%d", i)).Obj()
			tt.mutate(p)
			err := env.Client.Create(ctx(t), p)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error = %v, want Invalid saying %q", err, tt.wantErr)
			}
		})
	}
}
