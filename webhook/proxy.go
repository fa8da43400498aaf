package webhook

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The CCM's PROXY protocol annotations: "true", "*", or a list of ports.
var proxyProtocolAnnotations = []string{
	"service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v1",
	"service.beta.kubernetes.io/scw-loadbalancer-proxy-protocol-v2",
	"service.beta.kubernetes.io/scw-loadbalancer-send-proxy-v2",
}

// proxyProtocolWarning warns when PROXY protocol covers only some ports. The
// reserved IP is published in the Service's status, so kube-proxy sends
// in-cluster clients straight to the backends, bypassing the LB: on the
// ports that expect a PROXY header those connections break, and on the others
// they lose nothing. Mixed Services are where that surprises people.
func proxyProtocolWarning(svc *corev1.Service) string {
	for _, key := range proxyProtocolAnnotations {
		v := strings.TrimSpace(svc.Annotations[key])
		if v == "" || v == "false" || v == "true" || v == "*" {
			continue
		}
		covered := map[int32]bool{}
		for _, p := range strings.Split(v, ",") {
			if n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32); err == nil {
				covered[int32(n)] = true
			}
		}
		var missing []string
		for _, port := range svc.Spec.Ports {
			if !covered[port.Port] {
				missing = append(missing, strconv.Itoa(int(port.Port)))
			}
		}
		if len(missing) > 0 && len(covered) > 0 {
			return fmt.Sprintf("scw-lb-ipam: %s enables PROXY protocol on ports %s but not on %s; in-cluster clients reach the backends directly, bypassing the Load Balancer, so they send no PROXY header on any port: enable it on all ports or on none", key, v, strings.Join(missing, ","))
		}
	}
	return ""
}
