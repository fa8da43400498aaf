package oldccm

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	ipamapi "github.com/scaleway/scaleway-sdk-go/api/ipam/v1"
	lbapi "github.com/scaleway/scaleway-sdk-go/api/lb/v1"
	"github.com/scaleway/scaleway-sdk-go/scw"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The CCM's names, spelled as its own code spells them.
const (
	annotationLoadBalancerID    = "service.beta.kubernetes.io/scw-loadbalancer-id"
	annotationPNIDs             = "service.beta.kubernetes.io/scw-loadbalancer-pn-ids"
	annotationPrivateIPIDs      = "service.beta.kubernetes.io/scw-loadbalancer-private-ip-ids"
	annotationPrivate           = "service.beta.kubernetes.io/scw-loadbalancer-private"
	annotationExternallyManaged = "service.beta.kubernetes.io/scw-loadbalancer-externally-managed"
	// Finalizer is the cloud-provider service controller's: added before
	// the Load Balancer is created, removed once it is deleted.
	Finalizer = "service.kubernetes.io/load-balancer-cleanup"
	// managedTag marks the Load Balancers the CCM created.
	managedTag = "managed-by-scaleway-cloud-controller-manager"
)

// The service controller's retry delays of a failed sync (its queue's
// exponential rate limiter): from minRetryDelay, doubling at each failure of
// the same version, up to maxRetryDelay.
const (
	minRetryDelay = 5 * time.Second
	maxRetryDelay = 300 * time.Second
)

// UserAgent is sent with every Scaleway call of the fake, so that a suite
// can tell them from the webhook's in the emulator's request log.
const UserAgent = "scaleway-cloud-controller-manager-v0.35-fake"

// Options configures a Controller.
type Options struct {
	Kube     client.Client
	Scaleway []scw.ClientOption
	// Zone of the Load Balancers; default fr-par-1.
	Zone scw.Zone
	// ClusterPrivateNetworkID is the CCM's PN_ID: the network a Load
	// Balancer is attached to when the Service names none.
	ClusterPrivateNetworkID string
	// Delay is waited before acting on each new version of a Service (the
	// service controller's queue and the Load Balancer API's provisioning
	// take seconds) and before tearing a deleted one down: the window in
	// which a deleted Service is Terminating with its IPs still attached.
	// A failed sync of a version is retried after the service
	// controller's backoff instead: 5 s, doubling, at most 300 s.
	Delay time.Duration
	// Clock times Delay and the retries; default the real clock.
	Clock clock.PassiveClock
	// Interval between two looks at the Services; default 100 ms.
	Interval time.Duration
	// Logf receives one line per action and error; nil discards them.
	Logf func(format string, args ...any)
}

// Controller is the fake. Run drives it; Sync is one pass.
type Controller struct {
	o    Options
	lb   *lbapi.ZonedAPI
	ipam *ipamapi.API

	mu sync.Mutex
	// done is what each Service asked for when it was last reconciled
	// (wanted).
	done map[types.UID]string
	// due is when a Service's pending version (or teardown) may be acted on.
	due map[string]time.Time
	// known are the UIDs of the last pass: one missing now was deleted,
	// maybe before the finalizer was added, and its LB is collected.
	known map[types.UID]bool
	// retries are the Services whose last sync failed.
	retries map[types.UID]*retry
}

// retry is the backoff of a Service whose sync failed.
type retry struct {
	version string // what the failed sync acted on (wanted)
	delay   time.Duration
	next    time.Time
}

// New returns a Controller talking to the Scaleway API of opts.Scaleway.
func New(o Options) (*Controller, error) {
	if o.Zone == "" {
		o.Zone = scw.ZoneFrPar1
	}
	if o.Interval == 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	region, err := o.Zone.Region()
	if err != nil {
		return nil, err
	}
	opts := append(slices.Clone(o.Scaleway), scw.WithUserAgent(UserAgent), scw.WithDefaultZone(o.Zone), scw.WithDefaultRegion(region))
	cli, err := scw.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &Controller{
		o: o, lb: lbapi.NewZonedAPI(cli), ipam: ipamapi.NewAPI(cli),
		done: map[types.UID]string{}, due: map[string]time.Time{}, known: map[types.UID]bool{}, retries: map[types.UID]*retry{},
	}, nil
}

// Run syncs every Interval until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	for {
		c.Sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(c.o.Interval):
		}
	}
}

// Sync is one pass over the Services; errors are logged, and a failed sync
// is retried after the service controller's backoff (a teardown on the next
// pass after Delay).
func (c *Controller) Sync(ctx context.Context) {
	var list corev1.ServiceList
	if err := c.o.Kube.List(ctx, &list); err != nil {
		c.logf("listing Services: %v", err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.o.Clock.Now()
	seen := map[types.UID]bool{}
	gone := false
	for i := range list.Items {
		svc := &list.Items[i]
		seen[svc.UID] = true
		wants := svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.DeletionTimestamp == nil
		switch {
		case wants && c.done[svc.UID] != wanted(svc):
			c.syncEnsure(ctx, svc, now)
		case !wants && slices.Contains(svc.Finalizers, Finalizer):
			if !c.ready("delete/"+string(svc.UID), now) {
				continue
			}
			if err := c.ensureDeleted(ctx, svc); err != nil {
				c.logf("deleting the Load Balancer of %s/%s: %v", svc.Namespace, svc.Name, err)
			}
		}
	}
	for uid := range c.known {
		if !seen[uid] {
			gone = true
			delete(c.done, uid)
			delete(c.retries, uid)
		}
	}
	c.known = seen
	if gone {
		c.collect(ctx, list.Items)
	}
}

// syncEnsure ensures svc's Load Balancer, once its Delay or its backoff is
// over. c.mu is held.
func (c *Controller) syncEnsure(ctx context.Context, svc *corev1.Service, now time.Time) {
	// What this pass acts on, read before its own patches: they update svc
	// in place with the latest object, which may carry a change made
	// meanwhile that this pass has not acted on.
	acted := wanted(svc)
	if r := c.retries[svc.UID]; r != nil && r.version == acted {
		if now.Before(r.next) {
			return
		}
	} else {
		// A new version: its own Delay, no backoff.
		delete(c.retries, svc.UID)
		if !c.ready("ensure/"+string(svc.UID)+"/"+svc.ResourceVersion, now) {
			return
		}
	}
	if err := c.ensure(ctx, svc); err != nil {
		d := c.backoff(svc.UID, acted)
		c.logf("ensuring the Load Balancer of %s/%s: %v (retrying in %s)", svc.Namespace, svc.Name, err, d)
		return
	}
	delete(c.retries, svc.UID)
	c.done[svc.UID] = acted
}

// wanted is what a Service asks of its Load Balancer, as the service
// controller's needsUpdate compares it: its type and annotations (the CCM
// reads its whole configuration from them). Its own lb-id annotation
// counts too, so the pass after annotating a new Service ensures once more,
// as the real controller does on the update event its patch causes.
func wanted(svc *corev1.Service) string {
	keys := slices.Sorted(maps.Keys(svc.Annotations))
	var b strings.Builder
	b.WriteString(string(svc.Spec.Type))
	for _, k := range keys {
		b.WriteString("\x00" + k + "=" + svc.Annotations[k])
	}
	return b.String()
}

// ready tells whether the step named key has waited Delay since it was
// first due.
func (c *Controller) ready(key string, now time.Time) bool {
	first, ok := c.due[key]
	if !ok {
		c.due[key] = now
		first = now
	}
	if now.Sub(first) < c.o.Delay {
		return false
	}
	delete(c.due, key)
	return true
}

// backoff records a failed sync of version and returns the delay before the
// next try: minRetryDelay after the first failure of a version, twice the
// last one after each further failure, at most maxRetryDelay.
func (c *Controller) backoff(uid types.UID, version string) time.Duration {
	r := c.retries[uid]
	if r == nil || r.version != version {
		r = &retry{version: version}
		c.retries[uid] = r
	}
	r.delay = min(max(2*r.delay, minRetryDelay), maxRetryDelay)
	r.next = c.o.Clock.Now().Add(r.delay)
	return r.delay
}

// annotate is the CCM's annotateAndPatch.
func (c *Controller) annotate(ctx context.Context, svc *corev1.Service, lb *lbapi.LB) error {
	orig := svc.DeepCopy()
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[annotationLoadBalancerID] = lb.Zone.String() + "/" + lb.ID
	if err := c.o.Kube.Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("annotating the Service with its load balancer: %w", err)
	}
	return nil
}

// updateStatus writes the ingress the CCM reports: for a private Load
// Balancer the IPv4 addresses IPAM shows attached to it. The emulator has
// no flexible IPs, so a public one reports the same.
func (c *Controller) updateStatus(ctx context.Context, svc *corev1.Service, lb *lbapi.LB) error {
	region, _ := lb.Zone.Region()
	resp, err := c.ipam.ListIPs(&ipamapi.ListIPsRequest{
		Region: region, ProjectID: &lb.ProjectID, ResourceType: ipamapi.ResourceTypeLBServer, ResourceID: &lb.ID, IsIPv6: scw.BoolPtr(false),
	}, scw.WithAllPages(), scw.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("unable to query ipam for lb %s: %w", lb.ID, err)
	}
	var ingress []corev1.LoadBalancerIngress
	for _, ip := range resp.IPs {
		ingress = append(ingress, corev1.LoadBalancerIngress{IP: ip.Address.IP.String()})
	}
	if len(ingress) == 0 {
		return fmt.Errorf("no private network ip for lb %s", lb.ID)
	}
	if equalIngress(svc.Status.LoadBalancer.Ingress, ingress) {
		return nil
	}
	orig := svc.DeepCopy()
	svc.Status.LoadBalancer.Ingress = ingress
	if err := c.o.Kube.Status().Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("updating the Service's status: %w", err)
	}
	return nil
}

// ensureDeleted is the teardown of a Service deleted (or no longer a
// LoadBalancer): the CCM's EnsureLoadBalancerDeleted, then the finalizer
// removed as soon as DeleteLB is accepted. The Load Balancer may still be
// to_delete, its IPs attached, for a while after the Service is gone.
func (c *Controller) ensureDeleted(ctx context.Context, svc *corev1.Service) error {
	lb, err := c.fetch(ctx, svc)
	if err != nil {
		return err
	}
	// A shared (externally managed) LB stays: the CCM removes only this
	// Service's frontends and backends, which the emulator does not have.
	if lb != nil && svc.Annotations[annotationExternallyManaged] != "true" {
		if err := c.deleteLB(ctx, svc, lb); err != nil {
			return err
		}
	}
	if svc.DeletionTimestamp == nil && len(svc.Status.LoadBalancer.Ingress) > 0 {
		orig := svc.DeepCopy()
		svc.Status.LoadBalancer = corev1.LoadBalancerStatus{}
		if err := c.o.Kube.Status().Patch(ctx, svc, client.MergeFrom(orig)); err != nil {
			return fmt.Errorf("clearing the Service's status: %w", err)
		}
	}
	orig := svc.DeepCopy()
	svc.Finalizers = slices.DeleteFunc(svc.Finalizers, func(f string) bool { return f == Finalizer })
	if err := c.o.Kube.Patch(ctx, svc, client.MergeFrom(orig)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the finalizer: %w", err)
	}
	delete(c.done, svc.UID)
	delete(c.retries, svc.UID)
	return nil
}

// collect deletes the Load Balancers of Services that are gone without the
// finalizer's teardown (deleted before it was added), as the service
// controller does from its informer's delete event. One already being
// deleted (a teardown's, still to_delete) is left to go.
func (c *Controller) collect(ctx context.Context, services []corev1.Service) {
	keep := map[string]bool{}
	for _, svc := range services {
		keep[string(svc.UID)] = true
	}
	resp, err := c.lb.ListLBs(&lbapi.ZonedAPIListLBsRequest{Zone: c.o.Zone, Tags: []string{managedTag}}, scw.WithAllPages(), scw.WithContext(ctx))
	if err != nil {
		c.logf("listing load balancers: %v", err)
		return
	}
	for _, lb := range resp.LBs {
		if keep[lb.Name] || !slices.Contains(lb.Tags, managedTag) || lb.Status == lbapi.LBStatusToDelete {
			continue
		}
		if err := c.lb.DeleteLB(&lbapi.ZonedAPIDeleteLBRequest{Zone: lb.Zone, LBID: lb.ID, ReleaseIP: true}, scw.WithContext(ctx)); err != nil && !notFound(err) {
			c.logf("deleting orphaned load balancer %s: %v", lb.ID, err)
			continue
		}
		c.logf("deleted Load Balancer %s of a deleted Service", lb.ID)
	}
}

func (c *Controller) logf(format string, args ...any) {
	if c.o.Logf != nil {
		c.o.Logf("ccm: "+format, args...)
	}
}

func equalIngress(a, b []corev1.LoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.LoadBalancerIngress) bool { return x.IP == y.IP && x.Hostname == y.Hostname })
}
