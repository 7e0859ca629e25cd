// Package metadata serves the cloud metadata protocols a node reads its
// seed from (DESIGN §4), faithfully enough that a client which works
// against these works against the clouds: EC2's IMDSv2 (token flow only),
// GCE's metadata server, Azure's IMDS and OpenStack's metadata service,
// and an OpenStack config drive's tree (WriteConfigDrive).
//
// Each handler serves one Instance: its user data (the seed YAML; nil for
// none) and its name. Each refuses what its cloud refuses: IMDSv2 a GET
// without a token (401), GCE a request without Metadata-Flavor: Google
// (403), Azure one without Metadata: true (400), and all of them a request
// that carries X-Forwarded-For (a proxied request). The Broken variants
// break a protocol the way a misconfigured or hostile service would, for
// the tests of a node that must refuse them.
//
// The local-cluster harness serves one of these on its gateway at
// 169.254.169.254 (LinkLocal); tests serve them on loopback.
package metadata

// LinkLocal is the address every one of these clouds serves its metadata
// at.
const LinkLocal = "169.254.169.254"

// Instance is what a metadata service tells about one VM.
type Instance struct {
	// Name is the instance's name (EC2's Name tag, GCE's and Azure's VM
	// name, OpenStack's server name); "" for none.
	Name string
	// ID is the instance's ID; "" for one made from Name.
	ID string
	// UserData is the user data as the user gave it (the seed YAML); nil
	// for none.
	UserData []byte
}

func (in Instance) id(prefix string) string {
	if in.ID != "" {
		return in.ID
	}
	return prefix + in.Name
}
