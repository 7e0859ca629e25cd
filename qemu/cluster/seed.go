package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

// localSeed returns the seed every node of the cluster boots with: the
// cluster name, the SRV domain, the initial size and the CA (each node
// issues its own certificates). It names no node: each takes its name from
// its DHCP host name, so one seed volume serves all of them.
func localSeed(pkiDir, domain string, initialSize int) ([]byte, error) {
	return seedWith(pkiDir, domain, initialSize, Upgrade{}, seed.Backup{})
}

// Defaults of a local cluster's upgrade settings: the gate is kept short,
// local clusters are for trying things out and for tests.
const (
	defaultSettle = 15 * time.Second
	defaultGate   = 180 * time.Second
)

// seedWith is seed with the upgrade settings up (zero fields: defaults).
func seedWith(pkiDir, domain string, initialSize int, up Upgrade, backup seed.Backup) ([]byte, error) {
	if up.Tries < 0 || up.Settle < 0 || up.Gate < 0 {
		return nil, fmt.Errorf("seed: negative upgrade setting %+v", up)
	}
	if up.Settle == 0 {
		up.Settle = defaultSettle
	}
	if up.Gate == 0 {
		up.Gate = defaultGate
	}
	if up.Settle%time.Second != 0 || up.Gate%time.Second != 0 {
		return nil, fmt.Errorf("seed: upgrade settle %s and gate %s must be whole seconds", up.Settle, up.Gate)
	}
	s := seed.Seed{
		Cluster:   Name,
		Discovery: seed.Discovery{SRV: domain, InitialSize: initialSize},
		// Upgrades come from the network daemon's registry (registry.go),
		// plain HTTP on the gateway, and from nowhere else.
		Upgrade: seed.Upgrade{
			Registries:         []string{GuestRegistry()},
			InsecureRegistries: []string{GuestRegistry()},
			Tries:              up.Tries,
			SettleSeconds:      int(up.Settle / time.Second),
			GateSeconds:        int(up.Gate / time.Second),
			TrustedKeys:        up.TrustedKeys,
		},
		Backup: backup,
	}
	// The node CA is kept to the cluster's domain; the addresses come
	// from DHCP and may be renumbered, so they are not constrained.
	var err error
	if s.PKI, _, err = seed.IssuingPKIFrom(pkiDir, s.NodeScope()); err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	b, err := s.Marshal()
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	return b, nil
}

// Seed makes the CA of a new cluster in cfg.Dir (unless it has one) and
// returns the seed Up(cfg, initialSize) gives the nodes of that cluster,
// for images that carry it on their kernel command line (etcdbox.seed=)
// rather than read it from the seed volume: Up keeps the CA it finds.
func Seed(cfg Config, initialSize int) ([]byte, error) {
	pkiDir := filepath.Join(cfg.Dir, PKIDir)
	if _, err := ensureCA(pkiDir); err != nil {
		return nil, err
	}
	return seedWith(pkiDir, or(cfg.Domain, DefaultDomain), initialSize, cfg.Upgrade, cfg.Backup)
}

// ensureCA makes a CA and an admin certificate in pkiDir unless it holds
// a CA, and says whether it made them.
func ensureCA(pkiDir string) (bool, error) {
	_, err := os.Stat(filepath.Join(pkiDir, pki.CACertFile))
	if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, pki.Init(pkiDir, false)
}

// ensureSeed writes D/seed.img, the NoCloud volume attached read-only to
// every node that reads its seed from it, and D/seed.yaml, the same seed
// for the metadata services, unless they are there, and returns the
// volume's path.
func (c *Cluster) ensureSeed() (string, error) {
	p := filepath.Join(c.cfg.Dir, SeedFile)
	_, err := os.Stat(p)
	if err == nil {
		// Both files, or both anew (a cluster made before the YAML was
		// written).
		_, err = os.Stat(filepath.Join(c.cfg.Dir, SeedYAML))
	}
	if err == nil {
		_, err = os.Stat(filepath.Join(c.cfg.Dir, ConfigDriveFile))
	}
	if err == nil {
		return p, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	data, err := seedWith(c.PKIDir(), c.st.Domain, c.st.InitialSize, c.cfg.Upgrade, c.cfg.Backup)
	if err != nil {
		return "", err
	}
	if err := image.WriteCidata(p, data, []byte("instance-id: "+Name+"\n"), 0); err != nil {
		return "", err
	}
	// The metadata services serve the same seed (metadata.go), and a
	// config drive carries it; it holds the CA key. The drive is the
	// cluster's, so its meta_data.json names no instance: a node takes
	// its name from DHCP.
	if err := image.WriteConfigDrive(filepath.Join(c.cfg.Dir, ConfigDriveFile), data, []byte(`{"uuid": "`+Name+`"}`), 0); err != nil {
		return "", err
	}
	if err := pki.WriteFileAtomic(filepath.Join(c.cfg.Dir, SeedYAML), data, 0o600); err != nil {
		return "", err
	}
	// The seed holds the CA key.
	if err := os.Chmod(p, 0o600); err != nil {
		return "", err
	}
	c.cfg.Log("seed: %s (cluster %s, SRV domain %s, %d initial members, no node name: DHCP gives it)", p, Name, c.st.Domain, c.st.InitialSize)
	return p, nil
}

// Reseed writes the seed volume anew from the cluster's PKI directory,
// after a CA rotation promoted a new CA there: nodes started from now on
// (new ones, wiped ones, any that reboot) boot with the new root and a
// node CA under it. Running VMs keep the volume they opened.
func (c *Cluster) Reseed() error {
	p := filepath.Join(c.cfg.Dir, SeedFile)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, f := range []string{SeedYAML, ConfigDriveFile} {
		if err := os.Remove(filepath.Join(c.cfg.Dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	_, err := c.ensureSeed()
	return err
}
