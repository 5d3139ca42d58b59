// Package controller holds Gantry's controllers: runnerpool (how many runners a pool
// needs) and runner (one ephemeral runner's life). This file declares, as RBAC
// markers, every permission the controller manager uses; `make generate` turns them
// into config/rbac/role.yaml.
package controller

// +kubebuilder:rbac:groups=gantry.dev,resources=runnerpools;runners,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=gantry.dev,resources=runnerpools/status;runners/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=gantry.dev,resources=runnerpools/finalizers;runners/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
