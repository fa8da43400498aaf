package oldccm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

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
// Private Networks (the cluster's when it names none) with DHCP, as v0.35
// does: it has no private-ip-ids, compares network IDs only (a network
// attached with any address stays), and detaches the networks pn-ids does
// not name (an externally managed Load Balancer's others are left).
func (c *Controller) attachPrivateNetworks(ctx context.Context, svc *corev1.Service, lb *lbapi.LB) error {
	external := svc.Annotations[annotationExternallyManaged] == "true"
	want := map[string]bool{}
	if !external {
		for _, pn := range ccmList(svc.Annotations[annotationPNIDs]) {
			want[pn] = true
		}
	}
	if len(want) == 0 {
		want[c.o.ClusterPrivateNetworkID] = true
	}
	resp, err := c.lb.ListLBPrivateNetworks(&lbapi.ZonedAPIListLBPrivateNetworksRequest{Zone: lb.Zone, LBID: lb.ID}, scw.WithAllPages(), scw.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("error listing private networks of load balancer %s: %w", lb.ID, err)
	}
	attached := map[string]bool{}
	for _, att := range resp.PrivateNetwork {
		if want[att.PrivateNetworkID] || external {
			attached[att.PrivateNetworkID] = true
			continue
		}
		if err := c.lb.DetachPrivateNetwork(&lbapi.ZonedAPIDetachPrivateNetworkRequest{Zone: lb.Zone, LBID: lb.ID, PrivateNetworkID: att.PrivateNetworkID}, scw.WithContext(ctx)); err != nil {
			return fmt.Errorf("unable to detach private network %s from %s: %w", att.PrivateNetworkID, lb.ID, err)
		}
		c.logf("detached private network %s from %s", att.PrivateNetworkID, lb.ID)
	}
	for pn := range want {
		if attached[pn] {
			continue
		}
		//lint:ignore SA1019 v0.35 attaches with DHCP this way
		req := &lbapi.ZonedAPIAttachPrivateNetworkRequest{Zone: lb.Zone, LBID: lb.ID, PrivateNetworkID: pn, DHCPConfig: &lbapi.PrivateNetworkDHCPConfig{}}
		if _, err := c.lb.AttachPrivateNetwork(req, scw.WithContext(ctx)); err != nil {
			return fmt.Errorf("unable to attach private network %s on %s: %w", pn, lb.ID, err)
		}
		c.logf("attached private network %s to %s with DHCP", pn, lb.ID)
	}
	return nil
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
