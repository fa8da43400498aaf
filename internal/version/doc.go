// Package version is what a scw-lb-ipam binary says it is: the release
// version and the commit it was built from. Release builds (make image) stamp
// both at link time; other builds report what Go recorded in the binary.
//
// It imports no other package of this module.
package version
