package nodeapi

import "time"

// PathCARotation is one phase of a CA rotation on this node: GET (any
// certificate) says where the node is (CARotation), POST (admin) applies
// a phase (CARotationRequest) and answers once it is in effect.
const PathCARotation = "/v1/pki/rotation"

// The phases of a CA rotation, in order (DESIGN §6). Each runs on every
// node, one node at a time, before the next phase begins.
const (
	// RotationTrust: the node trusts the old and the new root together.
	// etcd reads its trusted CAs only at start: it restarts.
	RotationTrust = "trust"
	// RotationReissue: the node's leaves come from the new node CA. etcd
	// reads leaf files on every handshake: no restart.
	RotationReissue = "reissue"
	// RotationDrop: the node trusts the new root only. etcd restarts.
	RotationDrop = "drop"
)

// RotationPhases lists the phases in order.
var RotationPhases = []string{RotationTrust, RotationReissue, RotationDrop}

// PhaseIndex is phase's place in RotationPhases, -1 for none.
func PhaseIndex(phase string) int {
	for i, p := range RotationPhases {
		if p == phase {
			return i
		}
	}
	return -1
}

// CARotationRequest asks a node for one phase of the rotation to NewCA.
type CARotationRequest struct {
	Phase string `json:"phase"`
	// NewCA is the new root's certificate (PEM), in every phase.
	NewCA string `json:"newCA"`
	// NodeCACert and NodeCAKey (PEM) are the new node CA, under NewCA:
	// RotationReissue only.
	NodeCACert string `json:"nodeCACert,omitempty"`
	NodeCAKey  string `json:"nodeCAKey,omitempty"`
}

// CARotation is where a node is in a CA rotation, as it keeps it on
// DATA: a reboot mid-rotation resumes from it.
type CARotation struct {
	// ID names the rotation: the new root's SHA-256 fingerprint, hex,
	// its first 16 characters.
	ID string `json:"id,omitempty"`
	// Phase is the last phase in effect on the node ("" before any).
	Phase   string    `json:"phase,omitempty"`
	Updated time.Time `json:"updated,omitzero"`
	// Old and New are the common names of the old and new roots.
	Old string `json:"old,omitempty"`
	New string `json:"new,omitempty"`
}

// PKI is the node's certificates as status shows them.
type PKI struct {
	// Issuer says what issues the node's leaves: IssuerNodeCA,
	// IssuerRootKey or IssuerFixed.
	Issuer string `json:"issuer,omitempty"`
	// Renewed is when the node last issued its leaves; zero for fixed
	// ones.
	Renewed time.Time `json:"renewed,omitzero"`
	// Rotation is the node's CA rotation, when it has been through one.
	Rotation CARotation `json:"rotation,omitzero"`
	// Warnings are what an operator should fix.
	Warnings []string `json:"warnings,omitempty"`
}

// Values of PKI.Issuer.
const (
	IssuerNodeCA  = "node CA"
	IssuerRootKey = "root key"
	IssuerFixed   = "fixed"
)
