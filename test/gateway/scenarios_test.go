package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/scw-lb-ipam/scw-lb-ipam/ccm"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/fixtures"
)

// TestEnvoyGateway runs Envoy Gateway's controller in each deploy mode, one
// after the other (it listens on fixed ports), and in each a Gateway the
// pool allows and one it does not; then in a namespace the pool file does
// not name, where its Services are judged by that namespace.
func TestEnvoyGateway(t *testing.T) {
	if err := w.Kube.Create(ctx, gatewayClass()); err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		name, mode, controllerNS string
		scenarios                func(*testing.T, *controller, string)
	}{
		{controllerMode, controllerMode, controllerNamespace, func(t *testing.T, c *controller, mode string) {
			t.Run("PoolThroughTheGateway", func(t *testing.T) { testPoolThroughTheGateway(t, c, mode, apps) })
			t.Run("NamespaceNotAllowed", func(t *testing.T) { testNamespaceNotAllowed(t, c, mode) })
		}},
		{gatewayMode, gatewayMode, controllerNamespace, func(t *testing.T, c *controller, mode string) {
			t.Run("PoolThroughTheGateway", func(t *testing.T) { testPoolThroughTheGateway(t, c, mode, shop) })
			t.Run("NamespaceNotAllowed", func(t *testing.T) { testNamespaceNotAllowed(t, c, mode) })
		}},
		{"UnlistedControllerNamespace", controllerMode, unlistedNamespace, func(t *testing.T, c *controller, mode string) {
			t.Run("JudgedByTheControllersNamespace", func(t *testing.T) { testUnlistedController(t, c) })
		}},
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			c, err := w.startController(r.mode, r.controllerNS)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Stop()
			r.scenarios(t, c, r.mode)
			if err := c.Exited(); err != nil {
				t.Error(err)
			}
		})
	}
}

// testPoolThroughTheGateway: a Gateway in ns asks for the pool in its
// infrastructure annotations; its Service (in the controller's namespace or
// beside the Gateway, by mode) gets an address from the pool, attached by
// the CCM; the controller's own server-side re-apply of the Service (a
// listener's new port) keeps it; a Gateway deleted and created again gets
// it back on its new Service.
func testPoolThroughTheGateway(t *testing.T, c *controller, mode, ns string) {
	gw := gateway(ns, "web", 80)
	if err := w.Kube.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	st := w.admitted(t, c, ns, "web", mode)
	t.Logf("%s: Gateway %s/web → Service %s: %s (IPAM ID %s)", mode, ns, st.svc, st.addr, st.id)

	// A listener's new port: the controller applies the Service again, and
	// the CCM syncs its Load Balancer to it: networks first, then a
	// frontend for the new port. Once that frontend is made, the sync that
	// could have detached the pool's network is over.
	from := len(w.Emu.Requests())
	setListenerPort(t, ns, "web", 8080)
	fixtures.EventuallySays(t, time.Minute, poll, "the controller re-applying "+st.svc.String()+" with port 8080", func() (bool, string) {
		svc := w.service(t, ns, "web")
		if svc == nil || !hasPort(svc, 8080) {
			return false, describe(svc)
		}
		return true, ""
	})
	fixtures.EventuallySays(t, time.Minute, poll, "the CCM adding the port 8080 frontend to Load Balancer "+st.lb, func() (bool, string) {
		return w.madeFrontend(st.lb, from), "no CreateFrontend on it since the re-apply"
	})
	w.kept(t, "the controller's re-apply", st)

	deleteGateway(t, ns, "web")
	if err := w.Kube.Create(ctx, gateway(ns, "web", 8080)); err != nil {
		t.Fatal(err)
	}
	again := w.recreated(t, c, ns, "web", st)
	t.Logf("%s: re-created Gateway %s/web → Service %s: %s (IPAM ID %s) on a new Load Balancer", mode, ns, again.svc, again.addr, again.id)
	deleteGateway(t, ns, "web")
}

// testNamespaceNotAllowed: the same request from a Gateway in a namespace
// the pool does not allow is refused, and the refusal names the Gateway's
// namespace (in the default mode, not the controller's, where the Service
// is).
func testNamespaceNotAllowed(t *testing.T, c *controller, mode string) {
	w.refused(t, c, outside, outside)
	if c.contains("is not allowed for namespace " + controllerNamespace) {
		t.Errorf("%s: a refusal names the controller's namespace %s, not the Gateway's:\n%s", mode, controllerNamespace, c.Logs())
	}
}

// testUnlistedController: the negative control of gatewayControllers. A
// controller in a namespace the pool file does not name labels its
// Services with the Gateway's namespace as Envoy Gateway's does, but the
// label is not trusted there: a Gateway in apps, which the pool allows, is
// refused by the controller's namespace.
func testUnlistedController(t *testing.T, c *controller) {
	w.refused(t, c, apps, unlistedNamespace)
}

// refused creates Gateway ns/web asking for the pool and checks that the
// webhook refuses its Service, naming judged as the namespace the pool does
// not allow: the controller logs the refusal, and there is no Service and
// no new IP.
func (w *world) refused(t *testing.T, c *controller, ns, judged string) {
	before := len(w.Emu.IPs())
	if err := w.Kube.Create(ctx, gateway(ns, "web", 80)); err != nil {
		t.Fatal(err)
	}
	denial := fmt.Sprintf("pool \\\"%s\\\" is not allowed for namespace %s;", pool, judged)
	fixtures.EventuallySays(t, time.Minute, poll, "the webhook refusing the Service of Gateway "+ns+"/web", func() (bool, string) {
		return c.contains(denial), "the controller has not logged " + denial
	})
	_, why, _ := strings.Cut(c.line(denial), "denied the request: ")
	t.Logf("Gateway %s/web refused: %s", ns, strings.TrimSuffix(why, `"}`))
	if svc := w.service(t, ns, "web"); svc != nil {
		t.Errorf("Gateway %s/web has a Service despite the refusal: %s", ns, describe(svc))
	}
	if n := len(w.Emu.IPs()); n != before {
		t.Errorf("IPAM holds %d IPs after the refusal, %d before: a refused request must reserve nothing", n, before)
	}
	deleteGateway(t, ns, "web")
}

// describe is a Service's annotations and ports for a failure message.
func describe(svc *corev1.Service) string {
	if svc == nil {
		return "no Service"
	}
	var a []string
	for _, k := range []string{request.AnnotationPool, request.AnnotationAddresses, ccm.AnnotationPrivateIPIDs, ccm.AnnotationLoadBalancerID} {
		a = append(a, fmt.Sprintf("%s=%q", k, svc.Annotations[k]))
	}
	return svc.Namespace + "/" + svc.Name + ": " + strings.Join(a, " ")
}
