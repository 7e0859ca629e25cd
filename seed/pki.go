package seed

import (
	"fmt"

	"github.com/etcdbox/etcdbox/pki"
)

// IssuingPKI is the seed's pki section for nodes that issue their own
// leaves from ca: its certificate and its key. Every seed made from a CA
// (the CLI's `seed`, local clusters, tests, the bench) is made with it.
func IssuingPKI(ca *pki.CA) (PKI, error) {
	key, err := ca.KeyPEM()
	if err != nil {
		return PKI{}, fmt.Errorf("the CA's key: %w", err)
	}
	return PKI{CACert: string(ca.CertPEM()), CAKey: string(key)}, nil
}

// IssuingPKIFrom is IssuingPKI of the CA that `etcdbox pki init` wrote
// to dir.
func IssuingPKIFrom(dir string) (PKI, error) {
	ca, err := pki.LoadCAFiles(dir)
	if err != nil {
		return PKI{}, err
	}
	return IssuingPKI(ca)
}
