package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// GarbageCollector is kube-controller-manager running its garbage collector and its
// disruption controller only: a real cluster deletes an object's dependents once the
// object is gone (a Runner's pod and Secret, through their owner references), and
// computes each PodDisruptionBudget's status, which the eviction API reads (a budget
// whose status is not computed refuses every eviction); envtest runs no
// controller-manager.
type GarbageCollector struct {
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// StartGarbageCollector starts it against te's kube-apiserver, as an administrator,
// from the kube-controller-manager binary in assets.
func StartGarbageCollector(te *envtest.Environment, assets string) (*GarbageCollector, error) {
	admin, err := te.AddUser(envtest.User{Name: "gantry-test-garbage-collector", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding the garbage collector's user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gantry-testenv-gc-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(filepath.Join(assets, "kube-controller-manager"), //nolint:noctx // stopped by stop, with its group
		"--kubeconfig="+path, "--secure-port=0", "--leader-elect=false", "--controllers=garbagecollector,disruption")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting kube-controller-manager (garbage collector): %w", err)
	}
	gc := &GarbageCollector{cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(gc.done) }()
	return gc, nil
}

// Stop kills the process group it started and removes its files.
func (gc *GarbageCollector) Stop() {
	if gc == nil {
		return
	}
	_ = syscall.Kill(-gc.cmd.Process.Pid, syscall.SIGKILL)
	<-gc.done
	_ = os.RemoveAll(gc.dir)
}
