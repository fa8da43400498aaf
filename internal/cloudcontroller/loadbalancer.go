package cloudcontroller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	ipamapi "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	lbapi "github.com/scaleway/scaleway-sdk-go/api/lb/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ensure is the service controller's sync of a LoadBalancer Service: the
// finalizer, then the CCM's EnsureLoadBalancer.
func (c *Controller) ensure(ctx context.Context, svc *corev1.Service) error {
	if !slices.Contains(svc.Finalizers, Finalizer) {
		orig := svc.DeepCopy()
		svc.Finalizers = append(svc.Finalizers, Finalizer)
		if err := c.o.Kube.Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("adding the finalizer: %w", err)
		}
	}
	lb, err := c.fetch(ctx, svc)
	if err != nil {
		return err
	}
	if lb == nil {
		if svc.Annotations[annotationExternallyManaged] == "true" {
			return errors.New("cannot create an externally managed load balancer, please provide an existing load balancer instead")
		}
		if lb, err = c.lb.CreateLB(&lbapi.ZonedAPICreateLBRequest{
			Zone: c.o.Zone, Name: string(svc.UID), Description: "kubernetes service " + svc.Name,
			Tags: []string{managedTag}, Type: "lb-s", AssignFlexibleIP: scw.BoolPtr(svc.Annotations[annotationPrivate] != "true"),
		}, scw.WithContext(ctx)); err != nil {
			return fmt.Errorf("creating the load balancer: %w", err)
		}
		c.logf("created Load Balancer %s for %s/%s", lb.ID, svc.Namespace, svc.Name)
		if err := c.annotate(ctx, svc, lb); err != nil {
			return err
		}
	}
	// The CCM goes on only with a ready Load Balancer: one found by the
	// Service's scw-loadbalancer-id while it is being deleted is retried
	// until it is gone, and a new one is created then.
	if lb.Status != lbapi.LBStatusReady {
		return fmt.Errorf("load balancer %s is not ready (status %s)", lb.ID, lb.Status)
	}
	if err := c.attachPrivateNetworks(ctx, svc, lb); err != nil {
		return fmt.Errorf("failed to attach private networks: %w", err)
	}
	return c.updateStatus(ctx, svc, lb)
}

// fetch finds the Service's Load Balancer by the CCM's annotation, else by
// name (annotating it then); nil when there is none.
func (c *Controller) fetch(ctx context.Context, svc *corev1.Service) (*lbapi.LB, error) {
	if v := svc.Annotations[annotationLoadBalancerID]; v != "" {
		zone, id, ok := strings.Cut(v, "/")
		if !ok {
			zone, id = string(c.o.Zone), v
		}
		lb, err := c.lb.GetLB(&lbapi.ZonedAPIGetLBRequest{Zone: scw.Zone(zone), LBID: id}, scw.WithContext(ctx))
		if err == nil || !notFound(err) {
			return lb, err
		}
		return nil, nil
	}
	name := string(svc.UID)
	resp, err := c.lb.ListLBs(&lbapi.ZonedAPIListLBsRequest{Zone: c.o.Zone, Name: &name}, scw.WithAllPages(), scw.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	for _, lb := range resp.LBs {
		if lb.Name == name {
			return lb, c.annotate(ctx, svc, lb)
		}
	}
	return nil, nil
}

// attachPrivateNetworks attaches the Load Balancer to the Service's
// Private Networks (the cluster's when it names none) with the IPAM IDs of
// private-ip-ids that belong to each, detaching what it should not be on
// and what is attached with other IDs (an old CCM, IgnorePrivateIPIDs,
// reads no IDs: DHCP everywhere, and any attachment to a wanted network
// kept). An ID in none of the networks fails
// the sync, after the networks pn-ids does not name were detached, as the
// CCM orders it: a pn-ids that lost a pool's network costs the reserved IP
// before the error shows.
func (c *Controller) attachPrivateNetworks(ctx context.Context, svc *corev1.Service, lb *lbapi.LB) error {
	external := svc.Annotations[annotationExternallyManaged] == "true"
	want, ids, found, err := c.wantedNetworks(ctx, svc, lb, external)
	if err != nil {
		return err
	}
	resp, err := c.lb.ListLBPrivateNetworks(&lbapi.ZonedAPIListLBPrivateNetworksRequest{Zone: lb.Zone, LBID: lb.ID}, scw.WithAllPages(), scw.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("error listing private networks of load balancer %s: %w", lb.ID, err)
	}
	attached := map[string]bool{}
	for _, att := range resp.PrivateNetwork {
		ids, wanted := want[att.PrivateNetworkID]
		got := slices.Sorted(slices.Values(att.IpamIDs))
		if wanted && (len(ids) == 0 || slices.Equal(ids, got)) {
			attached[att.PrivateNetworkID] = true
			continue
		}
		if external && !wanted {
			continue // a shared LB's other networks are not this Service's
		}
		if err := c.lb.DetachPrivateNetwork(&lbapi.ZonedAPIDetachPrivateNetworkRequest{Zone: lb.Zone, LBID: lb.ID, PrivateNetworkID: att.PrivateNetworkID}, scw.WithContext(ctx)); err != nil {
			return fmt.Errorf("unable to detach private network %s from %s: %w", att.PrivateNetworkID, lb.ID, err)
		}
		c.logf("detached private network %s (IPAM IDs %v) from %s", att.PrivateNetworkID, att.IpamIDs, lb.ID)
	}
	for _, id := range ids {
		if !found[id] {
			return fmt.Errorf("private IP %q is in none of the private networks of load balancer %s", id, lb.ID)
		}
	}
	for pn, ids := range want {
		if attached[pn] {
			continue
		}
		req := &lbapi.ZonedAPIAttachPrivateNetworkRequest{Zone: lb.Zone, LBID: lb.ID, PrivateNetworkID: pn, IpamIDs: ids}
		if len(ids) == 0 {
			//lint:ignore SA1019 the real CCM attaches without IPAM IDs this way
			req.DHCPConfig = &lbapi.PrivateNetworkDHCPConfig{}
		}
		if _, err := c.lb.AttachPrivateNetwork(req, scw.WithContext(ctx)); err != nil {
			return fmt.Errorf("unable to attach private network %s on %s: %w", pn, lb.ID, err)
		}
		c.logf("attached private network %s to %s with IPAM IDs %v", pn, lb.ID, ids)
	}
	return nil
}

// wantedNetworks are the private networks svc asks lb to be attached to,
// each with the IPAM IDs (of private-ip-ids) found in it, sorted; ids are
// those private-ip-ids, found the ones some network holds.
func (c *Controller) wantedNetworks(ctx context.Context, svc *corev1.Service, lb *lbapi.LB, external bool) (want map[string][]string, ids []string, found map[string]bool, err error) {
	want = map[string][]string{} // PN → the IPAM IDs to attach it with
	if !external {
		for _, pn := range ccmList(svc.Annotations[annotationPNIDs]) {
			want[pn] = nil
		}
	}
	if len(want) == 0 {
		want[c.o.ClusterPrivateNetworkID] = nil
	}
	region, _ := lb.Zone.Region()
	if !c.o.IgnorePrivateIPIDs {
		ids = ccmList(svc.Annotations[annotationPrivateIPIDs])
	}
	found = map[string]bool{}
	if len(ids) > 0 {
		for pn := range want {
			resp, err := c.ipam.ListIPs(&ipamapi.ListIPsRequest{Region: region, PrivateNetworkID: &pn, IPIDs: ids}, scw.WithAllPages(), scw.WithContext(ctx))
			if err != nil {
				return nil, nil, nil, fmt.Errorf("listing the IPAM IPs of private network %s: %w", pn, err)
			}
			for _, ip := range resp.IPs {
				want[pn] = append(want[pn], ip.ID)
				found[ip.ID] = true
			}
			slices.Sort(want[pn])
		}
	}
	return want, ids, found, nil
}

// deleteLB is the CCM's deleteLoadBalancer: unannotate, then DeleteLB,
// which detaches its Private Networks.
func (c *Controller) deleteLB(ctx context.Context, svc *corev1.Service, lb *lbapi.LB) error {
	if _, ok := svc.Annotations[annotationLoadBalancerID]; ok {
		orig := svc.DeepCopy()
		delete(svc.Annotations, annotationLoadBalancerID)
		if err := c.o.Kube.Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("removing the load balancer annotation: %w", err)
		}
	}
	if lb.Name != string(svc.UID) {
		c.logf("load balancer for service %s/%s was renamed, not removing", svc.Namespace, svc.Name)
		return nil
	}
	if err := c.lb.DeleteLB(&lbapi.ZonedAPIDeleteLBRequest{Zone: lb.Zone, LBID: lb.ID, ReleaseIP: true}, scw.WithContext(ctx)); err != nil && !notFound(err) {
		return fmt.Errorf("error deleting load balancer %s for service %s/%s: %w", lb.ID, svc.Namespace, svc.Name, err)
	}
	c.logf("deleted Load Balancer %s of %s/%s", lb.ID, svc.Namespace, svc.Name)
	return nil
}

// ccmList reads a list annotation (pn-ids, private-ip-ids) as the CCM's
// getPrivateNetworkIDs does: nil when empty, else split on commas and
// nothing more. A padded, zonal or empty item is used as it is, and the
// calls that name it fail, as the CCM's do.
func ccmList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

func notFound(err error) bool {
	var nf *scw.ResourceNotFoundError
	var re *scw.ResponseError
	return errors.As(err, &nf) || (errors.As(err, &re) && re.StatusCode == http.StatusNotFound)
}
