package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestAssetsDirNamesTheBuildCommandWhenBinariesAreMissing(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", empty)
	_, err := AssetsDir("unused")
	if err == nil {
		t.Fatal("AssetsDir succeeded on an empty directory")
	}
	for _, want := range []string{"make k8s-bins", "etcd", "kube-apiserver", "kube-controller-manager", empty} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestAssetsDirAcceptsExecutables(t *testing.T) {
	dir := t.TempDir()
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBEBUILDER_ASSETS", dir)
	got, err := AssetsDir("unused")
	if err != nil {
		t.Fatalf("AssetsDir: %v", err)
	}
	if got != dir {
		t.Errorf("AssetsDir = %q, want %q", got, dir)
	}
}

func TestRepoRootFindsTheModule(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "config", "crd", "bases")); err != nil {
		t.Errorf("repository root %s has no config/crd/bases: %v", root, err)
	}
}

// The control plane admits pods as a real cluster does: the ServiceAccount admission
// plugin gives a pod its namespace's default ServiceAccount and mounts its token, and
// refuses a pod whose ServiceAccount does not exist.
func TestPodsAreAdmittedWithTheirServiceAccount(t *testing.T) {
	e, ctx := startForTest(t)
	pod := func(ns string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}

	ns := e.Namespace(t)
	p := pod(ns)
	if err := e.Client.Create(ctx, p); err != nil {
		t.Fatalf("creating a pod in a namespace made by Namespace: %v", err)
	}
	var token []string
	for _, v := range p.Spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					token = append(token, v.Name)
				}
			}
		}
	}
	if p.Spec.ServiceAccountName != "default" || len(token) != 1 {
		t.Errorf("admitted pod has ServiceAccount %q and token volumes %q; want default and one token volume", p.Spec.ServiceAccountName, token)
	}

	bare := "no-default-sa"
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bare}}); err != nil {
		t.Fatal(err)
	}
	err := e.Client.Create(ctx, pod(bare))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "serviceaccount") {
		t.Errorf("creating a pod in a namespace with no default ServiceAccount: got %v, want it refused by ServiceAccount admission", err)
	}
}

// The garbage collector runs, as in a real cluster: a Secret owned by a ConfigMap goes
// when the ConfigMap does.
func TestDependentsGoWithTheirOwner(t *testing.T) {
	e, ctx := startForTest(t)
	ns := e.Namespace(t)
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	if err := e.Client.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	dependent := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	if err := e.Client.Create(ctx, dependent); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	for {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(dependent), &corev1.Secret{})
		if apierrors.IsNotFound(err) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the dependent Secret is still there a minute after its owner was deleted (last error: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startForTest starts a control plane for one test, stopped when it ends, and a
// context of a minute for its calls.
func startForTest(t *testing.T) (*Env, context.Context) {
	t.Helper()
	e, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return e, ctx
}
