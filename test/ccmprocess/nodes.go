package ccmprocess

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// BookAndRegisterNodes books n addresses in the emulator's Private Network
// pnID, each attached to an Instance as a node's is, and registers Nodes
// node-<i> with them (RegisterNodes).
func BookAndRegisterNodes(ctx context.Context, admin client.Client, emu *emulator.Server, pnID string, n int) error {
	addrs := make([]netip.Addr, n)
	for i := range addrs {
		id, err := emu.AddIP(pnID, netip.Addr{}, nil, &emulator.Resource{Type: "instance_server", Name: fmt.Sprintf("node-%d", i)})
		if err != nil {
			return fmt.Errorf("booking node-%d's address: %w", i, err)
		}
		ip, _ := emu.IP(id)
		addr, ok := netip.AddrFromSlice(ip.Address.IP.To4())
		if !ok {
			return fmt.Errorf("node-%d got no IPv4 address in Private Network %s: %v", i, pnID, ip.Address)
		}
		addrs[i] = addr
	}
	return RegisterNodes(ctx, admin, "node", addrs...)
}

// RegisterNodes creates a Ready Node named name-<i> for each address, with
// that address as its InternalIP, as a kubelet registers itself: the
// service controller gives the CCM these Nodes, and the CCM makes their
// InternalIPs its backends' servers (with no Node it creates a backend
// without servers). Nodes that exist already are left as they are.
func RegisterNodes(ctx context.Context, admin client.Client, name string, addrs ...netip.Addr) error {
	for i, addr := range addrs {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i),
			Labels: map[string]string{corev1.LabelHostname: fmt.Sprintf("%s-%d", name, i)}}}
		if err := admin.Create(ctx, node); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return fmt.Errorf("registering Node %s: %w", node.Name, err)
		}
		node.Status = corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr.String()}, {Type: corev1.NodeHostName, Address: node.Name}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		}
		if err := admin.Status().Update(ctx, node); err != nil {
			return fmt.Errorf("setting the status of Node %s: %w", node.Name, err)
		}
	}
	return nil
}
