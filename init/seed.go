package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

// bakedSeed is where `etcdbox build --seed` puts a seed in the initramfs.
const bakedSeed = "/etc/etcdbox/seed.yaml"

// seedSource is one place a seed may come from, in priority order.
type seedSource struct {
	name string
	read func() ([]byte, bool, error)
}

// readSeed takes the seed from the first source that has one (DESIGN §4):
// the kernel command line, a NoCloud cidata volume (its user-data is the
// seed YAML), then the seed baked into the image; in container mode, the
// --seed file. A seed that does not parse stops the boot with an
// error naming the key, before anything reads it; the last good seed is
// cached in state/ and used only when no source has one.
func (n *node) readSeed(context.Context) error {
	var sources []seedSource
	if n.container {
		sources = append(sources, seedSource{"file " + n.seedFile, func() ([]byte, bool, error) {
			if n.seedFile == "" {
				return nil, false, nil
			}
			b, err := seed.ReadFile(n.seedFile)
			return b, err == nil, err
		}})
	} else {
		sources = append(sources,
			seedSource{"kernel command line (etcdbox.seed=)", func() ([]byte, bool, error) {
				return seed.FromCmdline(n.cmdlineText)
			}},
			seedSource{"NoCloud cidata volume (user-data)", readCidata},
			seedSource{"image (" + bakedSeed + ")", func() ([]byte, bool, error) {
				b, err := seed.ReadFile(bakedSeed)
				if errors.Is(err, os.ErrNotExist) {
					return nil, false, nil
				}
				return b, err == nil, err
			}},
		)
	}
	cache := filepath.Join(n.stateDir(), "seed.yaml")
	sources = append(sources, seedSource{"cache (" + cache + ")", func() ([]byte, bool, error) {
		b, err := seed.ReadFile(cache)
		if errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
		return b, err == nil, err
	}})

	for _, src := range sources {
		data, ok, err := src.read()
		if err != nil {
			return fmt.Errorf("seed from %s: %w", src.name, err)
		}
		if !ok {
			continue
		}
		s, err := seed.Parse(data)
		if err != nil {
			n.log.Printf("seed error: seed from %s: %v", src.name, err)
			return fmt.Errorf("seed from %s is invalid (see above); fix it and reboot: %w", src.name, errWait)
		}
		n.seed = s
		n.log.Printf("seed: from %s, cluster %q", src.name, s.Cluster)
		if err := os.MkdirAll(n.stateDir(), 0o700); err != nil {
			return fmt.Errorf("mkdir %s: %w", n.stateDir(), err)
		}
		if err := pki.WriteFileAtomic(cache, data, 0o600); err != nil {
			n.log.Printf("seed: cache it in %s: %v", cache, err)
		}
		return nil
	}
	n.log.Printf("seed error: no seed found (kernel command line etcdbox.seed=, %s, or --seed)", bakedSeed)
	return fmt.Errorf("no seed: %w", errWait)
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
