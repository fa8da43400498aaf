package testenv

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricsNamespace holds the ServiceAccounts of MetricsTokens.
const MetricsNamespace = "monitoring"

// MetricsTokens makes ServiceAccounts prometheus and nosy in
// MetricsNamespace, binds prometheus to the release's metrics-reader
// ClusterRole, and returns a bound token of each (a TokenRequest, as a
// projected volume gets) and a function that removes the binding.
func MetricsTokens(ctx context.Context, c client.Client, cs kubernetes.Interface, release string) (reader, other string, unbind func(), err error) {
	if err := EnsureNamespace(ctx, c, MetricsNamespace, nil); err != nil {
		return "", "", nil, err
	}
	for _, name := range []string{"prometheus", "nosy"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: MetricsNamespace, Name: name}}
		if err := c.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", "", nil, err
		}
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-" + release + "-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: release + "-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: MetricsNamespace, Name: "prometheus"}},
	}
	if err := c.Create(ctx, binding); err != nil {
		return "", "", nil, err
	}
	unbind = func() { _ = c.Delete(context.Background(), binding) }
	token := func(sa string) (string, error) {
		tr, err := cs.CoreV1().ServiceAccounts(MetricsNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return tr.Status.Token, nil
	}
	if reader, err = token("prometheus"); err == nil {
		other, err = token("nosy")
	}
	if err != nil {
		unbind()
		return "", "", nil, err
	}
	return reader, other, unbind, nil
}
