package ebsstack

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UnionAccount is the one ServiceAccount aws-ebs-csi-driver's manifests run the whole controller Pod under:
// every sidecar's roles are bound to it, so each sidecar holds the union of their permissions.
const UnionAccount = "ebs-csi-controller-sa"

// controllerPodAccounts are the sidecars that share the controller Pod (and so UnionAccount) in upstream's
// manifests; snapshot-controller is a Deployment of its own there.
var controllerPodAccounts = []string{"csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter"}

// bindUnion binds to UnionAccount every role that deploy/rbac binds to one of the given sidecar accounts, with
// bindings named like upstream's (the role's binding, prefixed "union-"), and returns UnionAccount's
// kubeconfig. The per-sidecar bindings stay: a process only ever uses one account.
func (s *Stack) bindUnion(ctx context.Context, accounts []string) (string, error) {
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(sub rbacv1.Subject) bool {
			return sub.Kind == rbacv1.ServiceAccountKind && sub.Namespace == rbacNamespace && slices.Contains(accounts, sub.Name)
		})
	}
	union := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: UnionAccount, Namespace: rbacNamespace}}
	crbs, err := s.Client.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list ClusterRoleBindings: %w", err)
	}
	n := 0
	for _, b := range crbs.Items {
		if !bound(b.Subjects) {
			continue
		}
		c := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "union-" + b.Name}, RoleRef: b.RoleRef, Subjects: union}
		if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("bind %s to %s: %w", b.RoleRef.Name, UnionAccount, err)
		}
		n++
	}
	rbs, err := s.Client.RbacV1().RoleBindings(rbacNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("list RoleBindings in %s: %w", rbacNamespace, err)
	}
	for _, b := range rbs.Items {
		if !bound(b.Subjects) {
			continue
		}
		r := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: rbacNamespace, Name: "union-" + b.Name}, RoleRef: b.RoleRef, Subjects: union}
		if _, err := s.Client.RbacV1().RoleBindings(rbacNamespace).Create(ctx, r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("bind %s to %s: %w", b.RoleRef.Name, UnionAccount, err)
		}
		n++
	}
	if n == 0 {
		return "", fmt.Errorf("no binding in deploy/rbac names the sidecars %v", accounts)
	}
	return s.Cluster.ServiceAccountKubeconfig(ctx, rbacNamespace, UnionAccount)
}
