package clients

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestClients runs the scenarios. The late-deletion one waits out a 45 s
// Load Balancer deletion on a control plane of its own, so it runs beside
// the others, which run one after the other on the shared one.
func TestClients(t *testing.T) {
	var wg sync.WaitGroup
	wg.Go(func() { t.Run("LateLoadBalancerDeletion", testLateLoadBalancerDeletion) })
	t.Run("KubectlApplyTwice", testKubectlApplyTwice)
	t.Run("KubectlServerSideApplyTwice", testKubectlServerSideApplyTwice)
	t.Run("KubectlReplace", testKubectlReplace)
	t.Run("KubectlReplaceForce", testKubectlReplaceForce)
	t.Run("HelmUpgradeInstall", testHelmUpgradeInstall)
	wg.Wait()
}

// manifest writes testdata/service.yaml for the Service svc with a
// reservation from pool, and returns its path.
func (cp *controlPlane) manifest(t *testing.T, svc client.ObjectKey, pool string) string {
	t.Helper()
	tmpl, err := template.ParseFiles("testdata/service.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, map[string]string{"Namespace": svc.Namespace, "Name": svc.Name, "NodesPN": cp.PNs["nodes"].ID, "Pool": pool}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(cp.dir, svc.Name+".yaml")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// described waits until `kubectl describe service` lists an Event of the
// Service with reason and a note containing note: kubectl selects a
// Service's Events by its UID.
func (cp *controlPlane) described(t *testing.T, svc client.ObjectKey, reason, note string) {
	t.Helper()
	fixtures.EventuallySays(t, 30*time.Second, poll, "kubectl describe service "+svc.String()+" listing its "+reason+" Event", func() (bool, string) {
		out, err := cp.kubectl("describe", "service", "-n", svc.Namespace, svc.Name)
		if err != nil {
			return false, err.Error()
		}
		_, events, _ := strings.Cut(out, "Events:")
		return strings.Contains(events, reason) && strings.Contains(events, note), "Events:" + events
	})
}

// succeed runs a client command and fails the test when it fails, with its
// output (the apiserver's or the webhook's refusal).
func succeed(t *testing.T, tool func(...string) (string, error), name string, args ...string) {
	t.Helper()
	if out, err := tool(args...); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// testKubectlApplyTwice: client-side apply's three-way patch sets every
// field the manifest declares, so the re-apply writes pn-ids back to the
// nodes' network alone; external-dns's target, which the manifest does not
// declare, stays.
func testKubectlApplyTwice(t *testing.T) {
	scenario(t, func(t *testing.T) {
		svc := client.ObjectKey{Namespace: namespace, Name: "kubectl-apply"}
		file := s.manifest(t, svc, "dc-link")
		succeed(t, s.kubectl, "kubectl", "apply", "-f", file)
		st := s.firstAdmission(t, svc, s.PNs["dc"].ID, true)
		s.dnsTargeted(t, st)
		s.described(t, svc, "IPReserved", "reserved "+st.addr+" (IPAM ID "+st.id+") from pool dc-link")
		succeed(t, s.kubectl, "kubectl", "apply", "-f", file)
		s.reapplied(t, "the second kubectl apply", st)
	})
}

// testKubectlServerSideApplyTwice: Argo CD's server-side apply, with its
// field manager. The re-apply resets pn-ids, which the manifest declares,
// and leaves the annotations it does not (the admission's, external-dns's
// target), as client-side apply does; kubectl replace drops them
// (testKubectlReplace). No --force-conflicts: the manifest's fields have no other
// manager (the CCM's patches write the Load Balancer's ID and the
// finalizer, which the manifest does not set), so the apply conflicts with
// nobody, as Argo CD's own re-applies.
func testKubectlServerSideApplyTwice(t *testing.T) {
	scenario(t, func(t *testing.T) {
		svc := client.ObjectKey{Namespace: namespace, Name: "kubectl-ssa"}
		file := s.manifest(t, svc, "dc-link")
		apply := []string{"apply", "--server-side", "--field-manager=argocd-controller", "-f", file}
		succeed(t, s.kubectl, "kubectl", apply...)
		st := s.firstAdmission(t, svc, s.PNs["dc"].ID, true)
		s.dnsTargeted(t, st)
		succeed(t, s.kubectl, "kubectl", apply...)
		s.reapplied(t, "the second kubectl apply --server-side", st)
	})
}

// testKubectlReplace: replace sends the manifest as the whole object, so
// the update drops every annotation the manifest does not declare (the
// admission's, external-dns's target, and the CCM's Load Balancer ID): the
// webhook puts its own and the target back.
func testKubectlReplace(t *testing.T) {
	scenario(t, func(t *testing.T) {
		svc := client.ObjectKey{Namespace: namespace, Name: "kubectl-replace-update"}
		file := s.manifest(t, svc, "dc-link")
		succeed(t, s.kubectl, "kubectl", "create", "-f", file)
		st := s.firstAdmission(t, svc, s.PNs["dc"].ID, true)
		s.dnsTargeted(t, st)
		succeed(t, s.kubectl, "kubectl", "replace", "-f", file)
		// The CCM's own marks go too, the CCM's to write again: only what
		// the admission keeps is checked.
		s.sameReservation(t, "kubectl replace", st, s.get(svc))
	})
}

// testKubectlReplaceForce: replace --force deletes the Service, waits until
// it is gone and creates it again; the new Service gets the reservation its
// previous incarnation used.
func testKubectlReplaceForce(t *testing.T) {
	scenario(t, func(t *testing.T) {
		svc := client.ObjectKey{Namespace: namespace, Name: "kubectl-replace"}
		file := s.manifest(t, svc, "dc-link")
		succeed(t, s.kubectl, "kubectl", "create", "-f", file)
		st := s.firstAdmission(t, svc, s.PNs["dc"].ID, true)
		succeed(t, s.kubectl, "kubectl", "replace", "--force", "-f", file)
		s.recreated(t, "kubectl replace --force", st)
	})
}
