package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

func TestDeniedAfterMutationIsReclaimed(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "deny-leaky"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: ptr(admissionregistrationv1.Fail),
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}},
					},
				}}},
				Validations: []admissionregistrationv1.Validation{{Expression: `object.metadata.name != "leaky"`, Message: "no leaky Services"}},
			},
		}
		binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "deny-leaky"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "deny-leaky",
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
		}
		for _, o := range []client.Object{policy, binding} {
			if err := s.Kube.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
			defer s.Kube.Delete(ctx, o)
		}
		// The policy takes a moment to be loaded by the apiserver: probe
		// it with a ClusterIP Service of the same name, which neither the
		// webhook nor the CCM acts on. A LoadBalancer Service admitted
		// before the policy loads gets a Load Balancer, and the real CCM,
		// given it deleted and created again at once, can keep the second
		// one's finalizer for good (a 409 on the attach, then "no private
		// network ip" on each cleanup): the CCM's behaviour, not this
		// test's subject.
		probe := fixtures.Service("payments", "leaky", nil)
		probe.Spec.Type = corev1.ServiceTypeClusterIP
		fixtures.Eventually(t, 20*time.Second, poll, "the policy to deny a Service named leaky", func() bool {
			err := s.Kube.Create(ctx, probe.DeepCopy())
			if err == nil {
				del(t, probe)
				return false
			}
			if !strings.Contains(err.Error(), "no leaky Services") {
				t.Fatalf("unexpected error: %v", err)
			}
			return true
		})
		svc := fixtures.PrivateService("payments", "leaky", map[string]string{request.AnnotationPool: "general"})
		if err := s.Kube.Create(ctx, svc); err == nil || !strings.Contains(err.Error(), "no leaky Services") {
			t.Fatalf("creating payments/leaky: got %v, want the policy's denial after our mutation", err)
		}
		var leaked string
		for _, ip := range s.Emu.IPs() {
			if e, ok := ipam.ParseEntry(ip.Tags); ok && e.Service.String() == "payments/leaky" {
				leaked = ip.ID
			}
		}
		if leaked == "" {
			t.Fatal("the denied payments/leaky has no booking: the webhook did not reserve before the policy denied")
		}
		// Booked, Service absent: the sweeper reclaims it after the pending grace.
		fixtures.Eventually(t, pendingGrace+15*time.Second, poll, "the sweeper to reclaim the leaked IP", func() bool {
			_, ok := s.Emu.IP(leaked)
			return !ok
		})
	})
}

func TestRetentionKeepsThenReleases(t *testing.T) {
	scenario(t, func(t *testing.T) {
		ctx := context.Background()
		create := func() string {
			svc := fixtures.PrivateService("payments", "stable", map[string]string{request.AnnotationPool: "dc-link"})
			if err := s.Kube.Create(ctx, svc); err != nil {
				t.Fatal(err)
			}
			return get(t, "payments", "stable").Annotations[ccm.AnnotationPrivateIPIDs]
		}
		orphaned := func(id string) func() bool {
			return func() bool {
				ip, ok := s.Emu.IP(id)
				e, _ := ipam.ParseEntry(ip.Tags)
				return ok && !e.OrphanedSince.IsZero()
			}
		}
		id := create()
		// The sweeper sees the Service live and back-fills its uid: from
		// then on the reservation is kept for the pool's retention.
		backfilled(t, get(t, "payments", "stable"), id)
		// The CCM attaches the IP to the Load Balancer...
		attachedTo(t, "payments", "stable", id)
		// ...and Scaleway detaches it once the LB is gone, which happens
		// after the Service is: the CCM lets the Service go as soon as
		// DeleteLB is accepted.
		del(t, get(t, "payments", "stable"))
		fixtures.Eventually(t, 15*time.Second, poll, "detached once the Load Balancer is gone", func() bool {
			ip, _ := s.Emu.IP(id)
			return ip.Resource == nil
		})
		fixtures.Eventually(t, 10*time.Second, poll, "orphaned-since after the delete", orphaned(id))
		// Re-created within retention: the same IP comes back, and the
		// admission's own write clears orphaned-since.
		mark := len(s.Emu.Audit())
		if again := create(); again != id {
			t.Fatalf("re-created Service got %s, want %s", again, id)
		}
		created := time.Now()
		if !slices.ContainsFunc(s.Emu.Audit()[mark:], func(ev emulator.AuditEvent) bool {
			e, _ := ipam.ParseEntry(ev.Tags)
			return ev.Kind == emulator.AuditTags && ev.IPID == id && !ev.Time.After(created) && e.OrphanedSince.IsZero()
		}) {
			t.Fatal("the take-back did not clear orphaned-since")
		}
		// A cycle whose live view predates the re-created Service may tag
		// it orphaned again (sweep.go: at worst for a cycle, never
		// released); the back-fill of its uid clears it.
		attachedTo(t, "payments", "stable", id)
		fixtures.Eventually(t, 10*time.Second, poll, "orphaned-since cleared after the reuse", func() bool { return !orphaned(id)() })
		// Deleted for good: released once the retention has passed.
		del(t, get(t, "payments", "stable"))
		fixtures.Eventually(t, 10*time.Second, poll, "orphaned-since after the second delete", orphaned(id))
		ip, _ := s.Emu.IP(id)
		e, _ := ipam.ParseEntry(ip.Tags)
		fixtures.Eventually(t, retention+15*time.Second, poll, "the release after retention", func() bool {
			_, ok := s.Emu.IP(id)
			return !ok
		})
		// Judged on the clocks that decide: the tag's and the release's.
		i := slices.IndexFunc(s.Emu.Audit(), func(ev emulator.AuditEvent) bool { return ev.Kind == emulator.AuditRelease && ev.IPID == id })
		if i < 0 {
			t.Fatalf("no release of %s in the audit log", id)
		}
		if kept := s.Emu.Audit()[i].Time.Sub(e.OrphanedSince); kept < retention {
			t.Fatalf("released %s after orphaned-since %s, before the %s retention", kept, e.OrphanedSince, retention)
		}
	})
}
