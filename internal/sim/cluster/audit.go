package cluster

import (
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// CollectorUser is the identity kube-controller-manager's garbage collector acts as
// (it runs with --use-service-account-credentials, as kubeadm and managed clusters
// run it): its deletes of the objects a deleted owner leaves are made on the owner's
// controller's behalf, so they are that controller's cost too.
const CollectorUser = "system:serviceaccount:kube-system:generic-garbage-collector"

// auditPolicy records one user's requests when they complete, at Metadata level, and
// the garbage collector's deletes; nothing else: the cost to the kube-apiserver follows
// that user's requests and the deletes made for it only.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  users: [%q]
- level: Metadata
  users: [%q]
  verbs: [delete, deletecollection]
- level: None
`

// configureAudit has the kube-apiserver, before it starts, record user's requests and
// the garbage collector's deletes in c.AuditLog.
func (c *Cluster) configureAudit(user string) error {
	policy := filepath.Join(c.opts.WorkDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, fmt.Appendf(nil, auditPolicy, user, CollectorUser), 0o644); err != nil {
		return err
	}
	c.AuditLog = filepath.Join(c.opts.WorkDir, "audit.log")
	// The kube-apiserver appends: a log left by an earlier run in the same directory
	// would be counted again.
	if err := os.Remove(c.AuditLog); err != nil && !os.IsNotExist(err) {
		return err
	}
	args := c.env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", c.AuditLog)
	args.Set("audit-log-format", "json")
	// Blocking: the log is complete the moment a request is answered (a line written
	// to the page cache costs the request microseconds).
	args.Set("audit-log-mode", "blocking")
	args.Set("audit-log-maxsize", "0")
	return nil
}

// writeAuditedKubeconfig creates user, with full rights, and its kubeconfig.
func (c *Cluster) writeAuditedKubeconfig(user string) error {
	u, err := c.env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("creating user %s: %w", user, err)
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return err
	}
	c.AuditedKubeconfig = filepath.Join(c.opts.WorkDir, "kubeconfig-"+user)
	return os.WriteFile(c.AuditedKubeconfig, kc, 0o600)
}
