package ccmprocess

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The identity of the shipped manifest (examples/k8s-scaleway-ccm-latest.yml
// in the CCM's repository): the ServiceAccount's user name and groups, as a
// token of it would authenticate. Its kubeconfig is a client certificate
// with these names: the same user to RBAC.
const (
	ServiceAccountNamespace = "kube-system"
	ServiceAccountName      = "cloud-controller-manager"
	User                    = "system:serviceaccount:" + ServiceAccountNamespace + ":" + ServiceAccountName
)

// Groups are the groups a ServiceAccount token of User carries.
var Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ServiceAccountNamespace, "system:authenticated"}

const roleName = "system:cloud-controller-manager"

// clusterRole is the shipped ClusterRole system:cloud-controller-manager,
// rule for rule: what the CCM may do is what a user's cluster lets it do,
// so a call it would be refused there fails here too.
func clusterRole() *rbacv1.ClusterRole {
	core := func(resources []string, verbs ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: resources, Verbs: verbs}
	}
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
			core([]string{"events"}, "create", "patch", "update"),
			core([]string{"nodes"}, "*"),
			core([]string{"nodes/status"}, "patch"),
			core([]string{"services"}, "list", "patch", "update", "watch"),
			core([]string{"services/status"}, "list", "patch", "update", "watch"),
			core([]string{"serviceaccounts"}, "create"),
			core([]string{"persistentvolumes"}, "get", "list", "update", "watch"),
			core([]string{"endpoints"}, "create", "get", "list", "watch", "update"),
		},
	}
}

// Grant creates the shipped ServiceAccount, ClusterRole, ClusterRoleBinding
// and the RoleBinding to extension-apiserver-authentication-reader, with an
// admin's client; what exists already is left as it is (two replicas, or a
// restart, grant once).
func Grant(ctx context.Context, admin client.Client) error {
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccountName, Namespace: ServiceAccountNamespace}}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccountName, Namespace: ServiceAccountNamespace}},
		clusterRole(),
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: roleName}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: roleName, Namespace: ServiceAccountNamespace}, Subjects: subject,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"}},
	}
	for _, o := range objs {
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("granting the CCM its shipped RBAC: creating %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}
