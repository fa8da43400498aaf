package webhook

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam"
	"github.com/scw-lb-ipam/scw-lb-ipam/request"
)

// reserve runs the plan. When one reservation fails, the ones this admission
// booked are released again, best effort: the sweeper reclaims the rest.
// own are the IDs the Service references now (an UPDATE).
func (m *ServiceMutator) reserve(ctx context.Context, key types.NamespacedName, p *request.Plan, own []string, dryRun bool) ([]*ipam.Reservation, error) {
	var out []*ipam.Reservation
	fail := func(err error) ([]*ipam.Reservation, error) {
		m.releaseBooked(ctx, key, out)
		return nil, err
	}
	for i, id := range p.IDs {
		r, err := m.Allocator.ValidateID(ctx, ipam.IDRequest{ID: id, Service: key, DryRun: dryRun, Own: own})
		if pool := p.Fallback(i, err); pool != nil {
			// A restored manifest whose reservation is gone or being
			// released: a fresh address from the same pool, not a denial.
			r, err = m.Allocator.Reserve(ctx, ipam.Request{Pool: pool, Service: key, DryRun: dryRun})
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
		req.Service, req.DryRun, req.Own = key, dryRun, own
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
func (m *ServiceMutator) releaseBooked(ctx context.Context, key types.NamespacedName, rs []*ipam.Reservation) {
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
