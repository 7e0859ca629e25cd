package seed

import (
	"fmt"
	"net"

	"github.com/etcdbox/etcdbox/pki"
)

// IssuingPKI is the seed's pki section for nodes that issue their own
// leaves: the root ca's certificate as the trust root, and a new node CA
// under it, constrained to scope (Seed.NodeScope). A root made before
// node CAs cannot sign one: its seed carries the root's own key instead
// (the caKey form), and legacy is set; `etcdbox pki rotate-ca` moves such
// a cluster to a new root. Every seed made from a CA (the CLI's `seed`,
// local clusters, tests, the bench) is made with it.
func IssuingPKI(ca *pki.CA, scope pki.NodeScope) (p PKI, legacy bool, err error) {
	nodeCA, err := ca.IssueNodeCA(scope, 0)
	if err != nil {
		if !ca.Cert.MaxPathLenZero {
			return PKI{}, false, err
		}
		key, err := ca.KeyPEM()
		if err != nil {
			return PKI{}, false, fmt.Errorf("the CA's key: %w", err)
		}
		return PKI{CACert: string(ca.CertPEM()), CAKey: string(key)}, true, nil
	}
	key, err := nodeCA.KeyPEM()
	if err != nil {
		return PKI{}, false, fmt.Errorf("the node CA's key: %w", err)
	}
	return PKI{CACert: string(ca.CertPEM()), NodeCACert: string(nodeCA.CertPEM()), NodeCAKey: string(key)}, false, nil
}

// IssuingPKIFrom is IssuingPKI of the CA that `etcdbox pki init` wrote
// to dir.
func IssuingPKIFrom(dir string, scope pki.NodeScope) (PKI, bool, error) {
	ca, err := pki.LoadCAFiles(dir)
	if err != nil {
		return PKI{}, false, err
	}
	return IssuingPKI(ca, scope)
}

// NodeScope is what the node CA of a seed like s may sign for: the SRV
// domain, the node's name and the static peers' names and host names,
// and the static peers' and interfaces' addresses. Without static
// addresses (DHCP) any address is allowed; add the nodes' networks to
// Networks to narrow it.
func (s *Seed) NodeScope() pki.NodeScope {
	var sc pki.NodeScope
	if s.Discovery.SRV != "" {
		sc.Domains = append(sc.Domains, s.Discovery.SRV)
	}
	if s.Name != "" {
		sc.Names = append(sc.Names, s.Name)
	}
	for _, p := range s.Discovery.Peers {
		sc.Names = append(sc.Names, p.Name)
		if ip := net.ParseIP(p.Host); ip != nil {
			bits := 8 * len(ip.To16())
			if ip4 := ip.To4(); ip4 != nil {
				ip, bits = ip4, 32
			}
			sc.Networks = append(sc.Networks, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
		} else {
			sc.Names = append(sc.Names, p.Host)
		}
	}
	for _, i := range s.Network.Interfaces {
		for _, a := range i.Addresses {
			if _, n, err := net.ParseCIDR(a); err == nil {
				sc.Networks = append(sc.Networks, n)
			}
		}
	}
	return sc
}
