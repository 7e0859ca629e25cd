package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/init/metadata"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

// bakedSeed is where `etcdbox build --seed` puts a seed in the initramfs.
const bakedSeed = "/etc/etcdbox/seed.yaml"

// seedSource is one place a seed may come from, in priority order: id is
// its short name, as the node API shows it (nodeapi.Status.SeedSource),
// name how the log names it.
type seedSource struct {
	id, name string
	read     func() ([]byte, bool, error)
}

// readSeed takes the seed from the first source that has one (DESIGN §4):
// the kernel command line, a NoCloud cidata volume (its user-data is the
// seed YAML), the cloud's metadata (cloudProbe: an OpenStack config drive,
// EC2 IMDSv2, GCE, Azure IMDS, OpenStack's metadata service), then the
// seed baked into the image; in container mode, the --seed file, then the
// metadata services at --metadata-url when it is given. A seed that does
// not parse, from any source, stops the boot with an error naming the
// source and the key, before anything reads it, and the node waits; the
// last good seed is cached in state/ and used only when no source has
// one.
func (n *node) readSeed(ctx context.Context) error {
	cloud := n.cloudProbe(ctx)
	for _, src := range n.seedSources(cloud) {
		data, ok, err := src.read()
		if err != nil {
			return fmt.Errorf("seed from %s: %w", src.name, err)
		}
		if !ok {
			continue
		}
		if src.id == cloudSourceID {
			src.id, src.name = cloud.found.ID, cloud.found.Source+" (user data)"
		}
		s, err := seed.Parse(data)
		if err != nil {
			n.log.Printf("seed error: seed from %s: %v", src.name, err)
			return fmt.Errorf("seed from %s is invalid (see above); fix it and reboot: %w", src.name, errWait)
		}
		n.seed, n.seedSource = s, src.id
		n.log.Printf("seed: from %s, cluster %q", src.name, s.Cluster)
		if err := os.MkdirAll(n.stateDir(), 0o700); err != nil {
			return fmt.Errorf("mkdir %s: %w", n.stateDir(), err)
		}
		n.nameFromCloud(s, cloud)
		if src.id != "cache" {
			if err := pki.WriteFileAtomic(n.seedCache(), data, 0o600); err != nil {
				n.log.Printf("seed: cache it in %s: %v", n.seedCache(), err)
			}
		}
		return nil
	}
	n.log.Printf("seed error: no seed found (kernel command line etcdbox.seed=, a cidata volume, cloud metadata, %s, or --seed)", bakedSeed)
	return fmt.Errorf("no seed: %w", errWait)
}

func (n *node) seedCache() string { return filepath.Join(n.stateDir(), "seed.yaml") }

// seedSources lists the sources readSeed asks, in order; cloud is nil
// when the node asks no cloud.
func (n *node) seedSources(cloud *cloudProbe) []seedSource {
	var sources []seedSource
	if n.container {
		sources = append(sources, seedSource{"file", "file " + n.seedFile, func() ([]byte, bool, error) {
			if n.seedFile == "" {
				return nil, false, nil
			}
			b, err := seed.ReadFile(n.seedFile)
			return b, err == nil, err
		}})
	} else {
		sources = append(sources,
			seedSource{"cmdline", "kernel command line (etcdbox.seed=)", func() ([]byte, bool, error) {
				return seed.FromCmdline(n.cmdlineText)
			}},
			seedSource{"nocloud", "NoCloud cidata volume (user-data)", readCidata},
		)
	}
	if cloud != nil {
		sources = append(sources, seedSource{cloudSourceID, "cloud metadata", cloud.read})
	}
	if !n.container {
		sources = append(sources, seedSource{"image", "image (" + bakedSeed + ")", func() ([]byte, bool, error) {
			return readOptional(bakedSeed)
		}})
	}
	return append(sources, seedSource{"cache", "cache (" + n.seedCache() + ")", func() ([]byte, bool, error) {
		return readOptional(n.seedCache())
	}})
}

// readOptional reads a seed file that may not exist.
func readOptional(path string) ([]byte, bool, error) {
	b, err := seed.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// readCmdline reads the kernel command line, once: the slot it booted
// (etcdbox.slot) and a seed it may carry are read from what it keeps.
func (n *node) readCmdline(context.Context) error {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return fmt.Errorf("read /proc/cmdline: %w", err)
	}
	n.cmdlineText = strings.TrimSpace(string(b))
	n.cmdline = seed.ParseCmdline(n.cmdlineText)
	return nil
}

// cloudSourceID stands for the cloud's source in seedSources until the
// probe tells which one gave the seed.
const cloudSourceID = "cloud"

// metadataDeadline bounds the whole cloud probe: a NIC up with DHCP, then
// every metadata service. A node outside any cloud waits no longer than
// this before its baked seed.
const metadataDeadline = 10 * time.Second

// cloudProbe asks the cloud the node runs in for its seed, when readSeed
// gets to it: found is what the cloud that is here told (here), the
// instance's name included.
type cloudProbe struct {
	n     *node
	ctx   context.Context
	base  string
	found metadata.Result
	here  bool
}

// cloudProbe returns the probe readSeed asks; nil when the node asks no
// cloud: --metadata-url off (or etcdbox.metadata=off on the kernel command
// line, which also takes a base URL), or container mode without
// --metadata-url.
func (n *node) cloudProbe(ctx context.Context) *cloudProbe {
	base := n.metadataURL
	if v, ok := n.cmdline["etcdbox.metadata"]; ok && !n.container {
		base = v
	}
	if base == "off" || (base == "" && n.container) {
		return nil
	}
	return &cloudProbe{n: n, ctx: ctx, base: base}
}

// read asks, all under metadataDeadline: as PID 1, an OpenStack config
// drive, and when there is none, the metadata services over a DHCP lease
// of the first NIC (released after: the network step configures the NIC
// as the seed says); in container mode, the metadata services only. The
// services are asked in their fixed order (metadata.Find); a service
// that breaks its protocol is refused and logged, and the next is asked.
func (p *cloudProbe) read() ([]byte, bool, error) {
	n := p.n
	ctx, cancel := context.WithTimeout(p.ctx, metadataDeadline)
	defer cancel()
	start := time.Now()
	defer func() { n.log.Printf("cloud metadata: asked in %s", time.Since(start).Round(time.Millisecond)) }()
	if !n.container {
		r, ok, err := readConfigDrive()
		switch {
		case err != nil:
			n.log.Printf("cloud metadata: %s: %v; asking the metadata services", metadata.ConfigDriveName, err)
		case ok:
			p.found, p.here = r, true
			return r.UserData, r.UserData != nil, nil
		}
		release, err := metadata.Link(ctx)
		if err != nil {
			n.log.Printf("cloud metadata: no network to ask the metadata services on: %v", err)
			return nil, false, nil
		}
		defer release()
	}
	r, ok := metadata.Find(ctx, metadata.New(p.base).Sources(), n.log.Printf)
	if !ok {
		return nil, false, nil
	}
	p.found, p.here = r, true
	if r.UserData == nil {
		n.log.Printf("cloud metadata: %s answers, with no user data", r.Source)
	}
	return r.UserData, r.UserData != nil, nil
}

// readConfigDrive mounts an OpenStack config drive read-only, when there
// is one, and reads it (metadata.ReadConfigDrive).
func readConfigDrive() (metadata.Result, bool, error) {
	dev, fstype, err := findVolume("/sys/class/block", "/dev", metadata.ConfigDriveLabel)
	if err != nil || dev == "" {
		return metadata.Result{}, false, err
	}
	dir := "/run/etcdbox/config-2"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return metadata.Result{}, false, err
	}
	if err := mountReadOnly(dev, dir, fstype); err != nil {
		return metadata.Result{}, false, fmt.Errorf("mount %s: %w", dev, err)
	}
	defer unmount(dir)
	r, err := metadata.ReadConfigDrive(dir)
	if err != nil {
		return metadata.Result{}, false, fmt.Errorf("%s: %w", dev, err)
	}
	return r, true, nil
}

// nameFromCloud names the node after its instance when the seed names
// none: the name the cloud that is here told, its first label in lower
// case, when that is a valid node name. It is kept in state/instance-name,
// so that a later boot whose metadata does not answer (its seed from the
// cache, say) keeps the name.
func (n *node) nameFromCloud(s *seed.Seed, cloud *cloudProbe) {
	if s.Name != "" {
		return
	}
	file := filepath.Join(n.stateDir(), "instance-name")
	var name, from string
	if cloud != nil && cloud.here {
		name, from = cloud.found.Name, cloud.found.Source
	} else if b, err := os.ReadFile(file); err == nil {
		name, from = strings.TrimSpace(string(b)), file
	}
	if name == "" {
		return
	}
	label, _, _ := strings.Cut(strings.ToLower(name), ".")
	if !seed.ValidName(label) || label == "localhost" {
		n.log.Printf("seed: the instance name %q from %s is not a valid node name; the node is not named after it", name, from)
		return
	}
	s.Name = label
	n.log.Printf("seed: node name %q, the instance's name from %s", label, from)
	if from != file {
		if err := pki.WriteFileAtomic(file, []byte(label+"\n"), 0o600); err != nil {
			n.log.Printf("seed: keep the instance name in %s: %v", file, err)
		}
	}
}
