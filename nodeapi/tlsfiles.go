package nodeapi

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdbox/etcdbox/pki"
)

// TLSFiles names the client side of mutual TLS with a node's API or with
// etcd, as etcdctl's --cacert, --cert and --key do: the CA certificate
// to trust (PEM, one or more), and the client certificate and its key.
type TLSFiles struct {
	CACert, Cert, Key string
}

// AdminFiles are the files of pkiDir as `etcdbox pki init` writes them:
// ca.crt, admin.crt and admin.key.
func AdminFiles(pkiDir string) TLSFiles {
	return TLSFiles{
		CACert: filepath.Join(pkiDir, pki.CACertFile),
		Cert:   filepath.Join(pkiDir, pki.AdminCertFile),
		Key:    filepath.Join(pkiDir, pki.AdminKeyFile),
	}
}

// IsZero reports whether no file is named.
func (f TLSFiles) IsZero() bool { return f == TLSFiles{} }

// Config loads the files: the CA certificate as the only trusted root,
// and the client certificate.
func (f TLSFiles) Config() (*tls.Config, error) {
	if f.CACert == "" || f.Cert == "" || f.Key == "" {
		return nil, fmt.Errorf("TLS files: want a CA certificate, a certificate and a key, have %q, %q and %q", f.CACert, f.Cert, f.Key)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("load admin certificate %s: %w", f.Cert, err)
	}
	caPEM, err := os.ReadFile(f.CACert)
	if err != nil {
		return nil, fmt.Errorf("load cluster CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("load cluster CA %s: no certificate", f.CACert)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}, nil
}

// NewClientFiles is NewClient with the client certificate of files.
func NewClientFiles(endpoint string, files TLSFiles) (*Client, error) {
	tc, err := files.Config()
	if err != nil {
		return nil, err
	}
	return NewClientTLS(endpoint, tc)
}
