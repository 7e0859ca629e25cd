package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdbox/etcdbox/pki"
)

// leafValidity is the life of the leaves a node issues itself. They are
// issued anew on every boot; renewal while running comes with the node API.
const leafValidity = 90 * 24 * time.Hour

// issueCertificates writes ca.crt, server.{crt,key} and peer.{crt,key}
// into state/pki: issued from the seed's CA when it carries a key, or the
// seed's own certificate and key otherwise. The SANs cover the node's name,
// its name in the discovery domain, its addresses and localhost.
func (n *node) issueCertificates(context.Context) error {
	dir := n.pkiDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	s := n.seed.PKI
	files := map[string][]byte{"ca.crt": []byte(s.CACert)}
	if s.CAKey != "" {
		ca, err := pki.LoadCA([]byte(s.CACert), []byte(s.CAKey))
		if err != nil {
			return fmt.Errorf("seed pki: %w", err)
		}
		dns, ips := n.sans()
		for _, kind := range []string{"server", "peer"} {
			cert, key, err := ca.Issue(pki.Leaf{
				CommonName: n.name,
				DNSNames:   dns,
				IPs:        ips,
				Server:     true,
				Client:     true,
				Validity:   leafValidity,
			})
			if err != nil {
				return fmt.Errorf("issue %s certificate: %w", kind, err)
			}
			files[kind+".crt"], files[kind+".key"] = cert, key
		}
	} else {
		for _, kind := range []string{"server", "peer"} {
			files[kind+".crt"], files[kind+".key"] = []byte(s.Cert), []byte(s.Key)
		}
	}
	for name, data := range files {
		mode := os.FileMode(0o644)
		if filepath.Ext(name) == ".key" {
			mode = 0o600
		}
		if err := pki.WriteFileAtomic(filepath.Join(dir, name), data, mode); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// sans returns the DNS names and addresses a node's leaves carry.
func (n *node) sans() ([]string, []net.IP) {
	var domains []string
	if n.domain != "" {
		domains = append(domains, n.domain)
	}
	return pki.NodeSANs(n.name, domains, n.ips)
}
