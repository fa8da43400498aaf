package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// create judges a CREATE, or an UPDATE that makes a Service a LoadBalancer:
// it reserves what the Service asks for. ns is the namespace its request
// is judged by (request.JudgedNamespace).
func (m *ServiceMutator) create(ctx context.Context, req admission.Request, cfg *ipam.Config, svc *corev1.Service, ns string, ask request.Ask) decision {
	return m.allocate(ctx, req, cfg, svc, ns, ask, nil, false)
}

// allocate plans ask against the pool file cfg (the one snapshot the whole
// admission reads) for namespace ns, holds the
// CCM's contract and reserves. own are the IDs the Service references now (an UPDATE);
// keepDHCP leaves a Service that asks for a reservation on the DHCP address
// of its Load Balancer, with a warning (see updateRules).
func (m *ServiceMutator) allocate(ctx context.Context, req admission.Request, cfg *ipam.Config, svc *corev1.Service, ns string, ask request.Ask, own []string, keepDHCP bool) decision {
	dryRun := req.DryRun != nil && *req.DryRun
	p, err := request.NewPlan(cfg, ns, ask)
	if err != nil {
		return refusal(err)
	}
	if p == nil {
		return decision{result: resultSkipped}
	}
	if keepDHCP {
		return decision{result: resultKept, dryRun: dryRun,
			keptDHCP: fmt.Sprintf("scw-lb-ipam: Service %s/%s already has a Load Balancer with a DHCP address and no reserved IP; it keeps that address and nothing was reserved. To move it to a reserved IP (%s), set annotation %s: \"true\" (the CCM re-attaches the Load Balancer: a brief outage)", req.Namespace, svc.Name, p.Describe(), request.AnnotationAllowIPChange)}
	}
	name := req.Name
	if name == "" {
		name = svc.Name
	}
	if name == "" {
		return refusal(errors.New("the Service has only generateName: scw-lb-ipam keeps a Service's IP across re-creation by its name, so it needs a fixed metadata.name; set one"))
	}
	key := types.NamespacedName{Namespace: req.Namespace, Name: name}
	if err := p.CheckNetworks(cfg, ask); err != nil {
		return refusal(err)
	}
	if err := request.CheckBeforeBooking(ctx, cfg, svc, ask, m.Allocator.PrivateNetworkExists); err != nil {
		return refusal(err)
	}
	reservations, err := m.reserve(ctx, key, ns, p, own, dryRun)
	// Brought-your-own IDs name their networks only once validated; the
	// pools' networks were checked before booking.
	if err == nil && len(p.IDs) > 0 {
		if err = request.CheckReserved(cfg, ask, p, reservations); err != nil {
			m.releaseBooked(ctx, key, reservations)
		}
	}
	if err != nil {
		return decision{result: resultDenied, err: err, failed: true, dryRun: dryRun}
	}
	d := decision{result: resultPatched, reserved: reservations, key: key, ask: ask, cfg: cfg, dryRun: dryRun}
	if dryRun {
		d.result = resultDryRun
	}
	return d
}

// reserve runs the plan. When one reservation is refused, the ones this
// admission booked are released again, best effort (the sweeper reclaims
// the rest), unless the refusal is retryable (a full pool whose oldest is
// being released for this Service, a previous Load Balancer still holding
// an address, an API or cache that did not answer): then they are kept,
// tagged for the Service, and its retry takes them back (sticky). A release
// made for it in an earlier pool is not lost to another CREATE in between:
// a pending booking does not yield for a while (ipam.Retention.Yieldable),
// and the pending grace reclaims it if the client gives up. own are the
// IDs the Service references now (an UPDATE); ns is the namespace whose
// share they count in.
func (m *ServiceMutator) reserve(ctx context.Context, key types.NamespacedName, ns string, p *request.Plan, own []string, dryRun bool) ([]*ipam.Grant, error) {
	var out []*ipam.Grant
	fail := func(err error) ([]*ipam.Grant, error) {
		if !ipam.Retryable(err) || dryRun {
			m.releaseBooked(ctx, key, out)
		}
		return nil, err
	}
	for i, id := range p.IDs {
		r, err := m.Allocator.ValidateID(ctx, ipam.IDRequest{ID: id, Service: key, Namespace: ns, DryRun: dryRun, Own: own})
		if pool := p.Fallback(i, err); pool != nil {
			// A restored manifest whose reservation is gone or being
			// released: a fresh address from the same pool, not a denial.
			r, err = m.Allocator.Reserve(ctx, ipam.Request{Pool: pool, Service: key, Namespace: ns, DryRun: dryRun})
			if err != nil {
				return fail(wrapReserveError(ipam.Request{Pool: pool}, err))
			}
		}
		if err != nil {
			return fail(&request.AnnotationError{Annotation: p.IDsFrom, Value: strings.Join(p.IDs, ","), Problem: err.Error(), Err: err})
		}
		out = append(out, r)
	}
	for _, req := range p.Reserve {
		req.Service, req.Namespace, req.DryRun, req.Own = key, ns, dryRun, own
		r, err := m.Allocator.Reserve(ctx, req)
		if err != nil {
			return fail(wrapReserveError(req, err))
		}
		out = append(out, r)
	}
	return out, nil
}

// releaseBooked releases, best effort, what a refused admission booked (the
// allocator leaves validated IDs alone): the sweeper reclaims the rest.
func (m *ServiceMutator) releaseBooked(ctx context.Context, key types.NamespacedName, rs []*ipam.Grant) {
	for _, r := range rs {
		if rerr := m.Allocator.Release(context.WithoutCancel(ctx), r); rerr != nil {
			m.Log.Error(rerr, "releasing a reservation of a failed admission; the sweeper will reclaim it", "service", key, "ipamID", r.ID)
		}
	}
}

func wrapReserveError(req ipam.Request, err error) error {
	switch ipam.ReasonOf(err) {
	case ipam.ReasonAddressOutsidePool, ipam.ReasonAddressTaken, ipam.ReasonAddressRequired:
		return &request.AnnotationError{Annotation: request.AnnotationAddress, Value: req.Address.String(), Problem: err.Error(), Err: err}
	case ipam.ReasonPoolDisabled, ipam.ReasonPoolExhausted:
		return &request.AnnotationError{Annotation: request.AnnotationPool, Value: req.Pool.Name, Problem: err.Error(), Err: err}
	}
	return err
}
