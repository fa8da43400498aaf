package request

// The label and annotations of scw-lb-ipam on Services and namespaces: this
// project's own, which the CCM never reads. The CCM's are in package ccm.
const (
	// LabelEnabled opts a namespace in. Namespaces without it are never touched.
	LabelEnabled = "scw-lb-ipam.io/enabled"

	// AnnotationPool names the pool, or pools on distinct Private Networks.
	AnnotationPool = "scw-lb-ipam.io/pool"
	// AnnotationAddress asks for specific addresses, one per Private Network.
	AnnotationAddress = "scw-lb-ipam.io/address"
	// AnnotationIPAMIDs passes pre-reserved IPAM IP IDs through, validated.
	AnnotationIPAMIDs = "scw-lb-ipam.io/ipam-ids"
	// AnnotationAllowIPChange lets an UPDATE move a live Service to new IPs:
	// the CCM then re-attaches the Load Balancer (a brief outage).
	AnnotationAllowIPChange = "scw-lb-ipam.io/allow-ip-change"
	// AnnotationAddresses is written back: the reserved addresses, readable
	// before the Load Balancer exists.
	AnnotationAddresses = "scw-lb-ipam.io/addresses"
)
