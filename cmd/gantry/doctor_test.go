package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/gantry-dev/gantry/internal/manager"
)

// A problem makes the command fail (exit status 1) after printing the report.
func TestDoctorExitsNonZeroOnAProblem(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(manager.Scheme()).Build()
	for _, output := range []string{"text", "json"} {
		var out strings.Builder
		err := runDoctor(context.Background(), kube, &doctorFlags{output: output, timeout: 10e9}, &out)
		var problems errProblems
		if !errors.As(err, &problems) || problems.n != 1 {
			t.Errorf("-o %s: error = %v, want one problem", output, err)
		}
		if !strings.Contains(out.String(), "NoPools") {
			t.Errorf("-o %s: output lacks the finding NoPools:\n%s", output, out.String())
		}
	}
}

func TestDoctorRefusesBadFlags(t *testing.T) {
	kube := fake.NewClientBuilder().WithScheme(manager.Scheme()).Build()
	for _, f := range []doctorFlags{
		{output: "yaml"},
		{output: "text", labels: []string{"linux"}},
		{output: "text", repository: "no-slash"},
		{output: "text", pool: "no-namespace"},
	} {
		var out strings.Builder
		err := runDoctor(context.Background(), kube, &f, &out)
		if err == nil || errors.As(err, new(errProblems)) {
			t.Errorf("flags %+v: error = %v, want a usage error", f, err)
		}
	}
}
