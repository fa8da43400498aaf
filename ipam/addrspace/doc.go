// Package addrspace is the address arithmetic of a pool: the set of
// addresses a pool may hand out and which of them are taken.
//
// A Space maps the pool's candidate ranges onto a dense index and keeps a
// bitmap of used indexes, so finding a free address in a nearly full /16 is a
// scan of a few hundred machine words rather than a walk over addresses.
//
// It is pure arithmetic on net/netip and netipx: it must not import any
// other package of this module.
package addrspace
