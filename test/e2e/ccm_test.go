package e2e

import (
	"context"
	"testing"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/ccmprocess"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
	"github.com/scw-lb-ipam/scw-lb-ipam/test/testenv"
)

// startCCM runs the Scaleway cloud-controller-manager beside
// kube-controller-manager, as a cluster's control plane runs it: its own
// client certificate as the ServiceAccount of its shipped manifest, with
// that manifest's RBAC, only the service controller, pointed at the
// emulator on the bridge (apiURL) with the nodes' network pnID. The
// kubelet's Node is its backends' server. It stops when t ends, before the
// emulator; its log's end is printed when t failed.
// ccmPrefix is the CCM's SCW_CCM_PREFIX: a Service's Load Balancer is
// named ccmPrefix and its UID.
const ccmPrefix = "e2e-"

func startCCM(t *testing.T, apiURL, pnID string) *ccmprocess.Process {
	t.Helper()
	if err := ccmprocess.Grant(context.Background(), cluster.kube); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cluster.pki.userKubeconfig("scaleway-ccm", "https://"+nodeIP+":"+apiserverPort, ccmprocess.User, ccmprocess.Groups...)
	if err != nil {
		t.Fatal(err)
	}
	// One replica, --leader-elect=false: see ccmprocess.Options.LeaderElection.
	p, err := ccmprocess.Start(ccmprocess.Options{
		Binary: cluster.bin("scaleway-cloud-controller-manager"), Kubeconfig: kubeconfig, Dir: t.TempDir(), Name: "scaleway-ccm",
		APIURL: apiURL, AccessKey: testenv.AccessKey, SecretKey: testenv.SecretKey, ProjectID: emulator.DefaultProjectID,
		PrivateNetworkID: pnID, Prefix: ccmPrefix,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("the end of the Scaleway CCM's log (%s):\n%s", p.LogPath, p.Tail(40))
		}
	})
	return p
}
