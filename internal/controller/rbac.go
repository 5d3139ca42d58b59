// Package controller holds Gantry's controllers: runnerpool (how many runners a pool
// needs) and runner (one ephemeral runner's life). This file declares, as RBAC
// markers, every permission the controller manager uses and no other; `make generate`
// turns them into config/rbac/role.yaml. test/reliability's TestLeastPrivilege runs the
// controller bound only to that role and fails if a request is refused or a verb
// granted here is never used.
//
//   - Pools are read through the informer cache (list, watch), never written but for
//     the drain finalizer (patch) and status (patch).
//   - Runners are created, deleted, patched (finalizer) and read through the cache; a
//     fresh read (get) guards against a stale cache before a runner is declared gone.
//   - The finalizers subresources (update) let the controller set blockOwnerDeletion on
//     what it owns: a Runner owned by its pool, a pod and a Secret owned by their
//     Runner (OwnerReferencesPermissionEnforcement admission checks it).
//   - Pods are watched (their runners' lives follow them), created and deleted, and
//     read fresh (get) before a runner whose pod vanished is failed. The pods of
//     runners that exited 0 are deleted many at a time (deletecollection, selected by
//     their runners' names). A pool with spec.usage.podLabels has each runner pod
//     labeled with its job's repository and workflow (patch).
//   - Secrets are never cached or listed: a runner's Secret is created, read (get) and
//     deleted by name, or with other exited runners' (deletecollection, by their
//     runners' names: the API server lists them itself), and the credentials and
//     webhook Secrets are read by name. A pool's credentials Secret is patched to add and remove the finalizer that keeps
//     it while the pool's runners may need unregistering.
//   - Events: events.k8s.io for the controllers' events (patch: an event series); core
//     events for leader election's, and listed (by the pod's name, uncached) once when a
//     runner pod fails PendingTimeout, to quote the pod's own last warning. Leases (get, create, update) for leader election;
//     a standby reads the Lease to forward webhooks to the leader.
//   - PersistentVolumeClaims (cache volumes, docs/caches.md) are cached (list, watch:
//     only Gantry's, by label), listed fresh (list) before a runner claims one, created
//     from the cache's template, patched to claim and release them, and deleted when
//     idle, when their node is gone and with their pool. A volume's PersistentVolume
//     is read by name (get), and its node from the nodes' cache, to skip a volume
//     pinned to a node that is gone, NotReady or cordoned; without these rights (a
//     namespaced install) every volume is taken to be usable.
//   - Kubernetes mode (spec.containerMode, docs/container-jobs.md): a pool's hook
//     ServiceAccount and template ConfigMap are written with server-side apply (create,
//     patch) in the pool's namespace, and a RoleBinding in containerMode.namespace binds
//     the shipped gantry-container-hook ClusterRole to it (create, patch, delete; bind on
//     that ClusterRole alone: no escalate, and no exec or log rights of the controller's
//     own). A runner's hook Secrets, which carry only the hook's runner-pod label, are
//     deleted with deletecollection by that label when the runner ends. With isolation
//     Runner (the default) each runner claims a hook slot (runner/hookslot.go): the
//     slots' ServiceAccounts are listed fresh (list), created and patched to claim
//     them; a slot's namespace is created (the Pod Security labels read from
//     containerMode.namespace: get) and deleted with its pool (list, by label); its
//     RoleBinding is read fresh (get) to tell a ready slot. A slot idle ten minutes
//     is deleted, ServiceAccount (delete) and namespace.
//   - Nodes are cached (list, watch), every node slimmed to its labels, cordon, taints
//     and conditions (internal/controller/nodes): one view for every pool and runner.
//     A pool's template that leaves the runners' OS or architecture open has
//     status.platform read from the Ready nodes its pods can be scheduled on
//     (runnerpool/platform.go), and a cache volume pinned to a node that is gone,
//     NotReady or cordoned is skipped (runner/cache.go; a node the cache does not hold
//     is read fresh, get, before its volume is deleted). Without these rights (a
//     namespaced install; checked once at start) no node is read: the pool takes
//     linux/amd64 and status.platform says why, and every volume is taken to be usable.
//   - NetworkPolicies: the runner policy (internal/controller/netpol) is cached (list,
//     watch: only Gantry's, by label), written by server-side apply (patch; create
//     the first time) in every namespace that holds pools, and deleted with the last
//     pool of its namespace.
package controller

// +kubebuilder:rbac:groups=gantry.dev,resources=runnerpools,verbs=list;watch;patch
// +kubebuilder:rbac:groups=gantry.dev,resources=runners,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=gantry.dev,resources=runnerpools/status;runners/status,verbs=patch
// +kubebuilder:rbac:groups=gantry.dev,resources=runnerpools/finalizers;runners/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;patch;delete;deletecollection
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;delete;deletecollection;patch
// +kubebuilder:rbac:groups="",resources=serviceaccounts;configmaps,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=list;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;create;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=gantry-container-hook
// +kubebuilder:rbac:groups="",resources=events,verbs=create;list
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update
