// Package scaleway is Scaleway as the rest of the project sees it: the
// narrow Cloud interface (IPAM IPs of one region and the Private Networks
// they live in), its value types, the classification of failed calls into
// Kinds, and the implementation on scaleway-sdk-go with bounded retries,
// Retry-After, paging and per-call observation.
//
// It is the only package of the binary that imports scaleway-sdk-go's API
// packages (internal/app names scw.ClientOption only, for tests to point the
// client at the emulator). It must not import any other package of this
// module, so that the allocator and the sweeper above it never see an SDK
// type.
package scaleway
