package allocator

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
)

// References answers "which live Services reference this IPAM ID?" from an
// informer cache of Services. An error (the cache cannot answer within the
// admission's deadline) fails the admission: an unknown answer never lets an
// IP be handed out.
type References interface {
	ReferencedBy(ctx context.Context, id string) ([]types.NamespacedName, error)
	// Exists reports whether a Service of that name exists, live or
	// Terminating: the previous incarnation of a re-created Service.
	Exists(ctx context.Context, svc types.NamespacedName) (bool, error)
}

// NoReferences is References for callers without a Service cache.
type NoReferences struct{}

func (NoReferences) ReferencedBy(context.Context, string) ([]types.NamespacedName, error) {
	return nil, nil
}

func (NoReferences) Exists(context.Context, types.NamespacedName) (bool, error) { return false, nil }

// Claims makes "one Service per bring-your-own IP" hold across replicas: the
// cache that References reads lags, and two replicas may validate the same
// ID at the same moment. Claim succeeds for exactly one Service per ID.
type Claims interface {
	Claim(ctx context.Context, id string, svc types.NamespacedName) error
	// ClaimedBy is the Service that claimed the ID, if any: read only.
	ClaimedBy(ctx context.Context, id string) (svc types.NamespacedName, ok bool, err error)
}

// NoClaims is Claims for a single process that trusts its cache alone.
type NoClaims struct{}

func (NoClaims) Claim(context.Context, string, types.NamespacedName) error { return nil }

func (NoClaims) ClaimedBy(context.Context, string) (types.NamespacedName, bool, error) {
	return types.NamespacedName{}, false, nil
}
