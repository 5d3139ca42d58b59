package cluster

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// StorageClass is the simulated cluster's storage class of per-node local volumes,
	// volumeBindingMode WaitForFirstConsumer: kube-scheduler chooses the node of a claim's
	// first pod, the provisioner makes a volume there, kube-controller-manager binds it,
	// and every later pod of the claim is pinned to that node.
	StorageClass = "gantry-sim-local"
	// Provisioner is the StorageClass's provisioner: the loop in this process.
	Provisioner = "sim.gantry.dev/local"

	// annSelectedNode is where kube-scheduler writes the node it chose for a
	// WaitForFirstConsumer claim.
	annSelectedNode = "volume.kubernetes.io/selected-node"
	// annProvisionedBy marks a PersistentVolume with its provisioner.
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"

	provisionEvery = 200 * time.Millisecond
)

// createStorageClass creates the StorageClass of the simulated local volumes.
func (c *Cluster) createStorageClass(ctx context.Context) error {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	reclaim := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClass},
		Provisioner:       Provisioner,
		VolumeBindingMode: &wffc,
		ReclaimPolicy:     &reclaim,
	}
	if err := c.Client.Create(ctx, sc); err != nil {
		return fmt.Errorf("creating StorageClass %s: %w", StorageClass, err)
	}
	return nil
}

// provision is the simulated local-volume provisioner, until ctx ends. Every
// provisionEvery it
//
//   - makes, for each claim of StorageClass that kube-scheduler gave a node
//     (volume.kubernetes.io/selected-node) and that has no volume yet, a
//     PersistentVolume named pvc-UID: a hostPath volume (kwok never mounts it) with
//     nodeAffinity to that node and a claimRef to the claim, which kube-controller-
//     manager's binder then binds;
//   - deletes the PersistentVolumes of StorageClass whose claim is gone (the class's
//     reclaimPolicy Delete): Released, or bound to a claim that no longer exists.
//
// A node's deletion leaves its volumes alone: whoever owns the claim deletes it, and
// the volume follows. Errors are written to log and retried on the next pass.
func (c *Cluster) provision(ctx context.Context, log io.Writer) {
	t := time.NewTicker(provisionEvery)
	defer t.Stop()
	for {
		if err := c.provisionOnce(ctx); err != nil && ctx.Err() == nil {
			fmt.Fprintf(log, "Volume provisioner: %v\n", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Cluster) provisionOnce(ctx context.Context) error {
	var claims corev1.PersistentVolumeClaimList
	if err := c.Client.List(ctx, &claims); err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	var pvs corev1.PersistentVolumeList
	if err := c.Client.List(ctx, &pvs); err != nil {
		return fmt.Errorf("listing volumes: %w", err)
	}
	claimUIDs := map[string]bool{}
	made := map[string]bool{} // claim UIDs that have a volume
	for _, pvc := range claims.Items {
		claimUIDs[string(pvc.UID)] = true
	}
	for _, pv := range pvs.Items {
		if pv.Spec.ClaimRef != nil {
			made[string(pv.Spec.ClaimRef.UID)] = true
		}
	}
	for i := range claims.Items {
		pvc := &claims.Items[i]
		node := pvc.Annotations[annSelectedNode]
		if ptr.Deref(pvc.Spec.StorageClassName, "") != StorageClass || node == "" || pvc.Spec.VolumeName != "" ||
			!pvc.DeletionTimestamp.IsZero() || made[string(pvc.UID)] {
			continue
		}
		if err := c.Client.Create(ctx, localVolume(pvc, node)); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("provisioning a volume for claim %s/%s: %w", pvc.Namespace, pvc.Name, err)
		}
	}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if pv.Spec.StorageClassName != StorageClass || !pv.DeletionTimestamp.IsZero() {
			continue
		}
		gone := pv.Status.Phase == corev1.VolumeReleased || pv.Spec.ClaimRef == nil || !claimUIDs[string(pv.Spec.ClaimRef.UID)]
		if !gone || time.Since(pv.CreationTimestamp.Time) < 5*time.Second {
			continue // a volume just made may not be in the claims listed before it
		}
		err := c.Client.Delete(ctx, pv, client.Preconditions{ResourceVersion: &pv.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting volume %s: %w", pv.Name, err)
		}
	}
	return nil
}

// VolumeBlocked reports whether kube-scheduler's message for an unschedulable pod (its
// PodScheduled condition, or a FailedScheduling event) blames a volume: a claim not bound
// yet, or a volume pinned to nodes the pod cannot use.
func VolumeBlocked(msg string) bool {
	// "didn't match PersistentVolume's node affinity", "pod has unbound immediate
	// PersistentVolumeClaims", "didn't find available persistent volumes to bind", …
	return strings.Contains(strings.ToLower(msg), "volume")
}

// localVolume is the PersistentVolume for claim pvc on node.
func localVolume(pvc *corev1.PersistentVolumeClaim, node string) *corev1.PersistentVolume {
	name := "pvc-" + string(pvc.UID)
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              StorageClass,
			VolumeMode:                    pvc.Spec.VolumeMode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/gantry-sim/" + name},
			},
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion,
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}},
			}}}},
		},
	}
}
