// Command verify measures what checking an upgrade image costs a node
// (issue 11): the signature check (the image's cosign signature against a
// trusted key) and the digest checks (SHA-256 of the manifest, the config
// and every layer the pull reads), as a share of the whole staging, which
// is the signature check, the pull (upgrade.Fetch: digests checked as the
// bytes arrive) and the slot write (slot.Stage into a copy of the
// builder's ESP, every file flushed to the disk).
//
// It runs the init's own code on the host, against an in-process registry
// on loopback, so it measures no emulation: under TCG the node's CPU is
// slower for the hashing and the pull alike. It prints figures, and
// records them for bench.json (bench/internal/figures); nothing is
// asserted.
//
//	go run ./bench/verify -oci out/etcdbox.tar -image out/etcdbox.img
package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/etcdbox/etcdbox/bench/internal/figures"
	"github.com/etcdbox/etcdbox/bench/internal/stats"
	"github.com/etcdbox/etcdbox/imagesig"
	"github.com/etcdbox/etcdbox/init/slot"
	"github.com/etcdbox/etcdbox/init/upgrade"
)

// The ESP's place on the builder's disks (docs/DESIGN.md, "Disk").
const (
	espOffset = 1 << 20
	espBytes  = 512 << 20
)

func main() {
	oci := flag.String("oci", "out/etcdbox.tar", "the upgrade image, an OCI tarball (etcdbox build --format oci)")
	img := flag.String("image", "out/etcdbox.img", "a raw disk image whose ESP the slot is staged next to")
	n := flag.Int("n", 5, "stagings measured")
	flag.Parse()
	if err := run(*oci, *img, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench verify:", err)
		os.Exit(1)
	}
}

func run(ociPath, rawPath string, n int) error {
	ctx := context.Background()
	work, err := os.MkdirTemp("", "etcdbox-bench-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	img, err := tarball.ImageFromPath(ociPath, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", ociPath, err)
	}
	ref, err := serveAndPush(ctx, img)
	if err != nil {
		return err
	}
	key, pub, err := signingKey()
	if err != nil {
		return err
	}
	if err := imagesig.Sign(ctx, ref, key); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	blobs, err := pulledBlobs(img)
	if err != nil {
		return err
	}
	esp := filepath.Join(work, "esp")
	if err := copyESP(rawPath, esp); err != nil {
		return err
	}
	st, err := slot.Read(slot.Dir(esp))
	if err != nil {
		return err
	}
	a := st.Slots["a"]
	if a.Entry == nil {
		return fmt.Errorf("%s: its ESP has no entry for slot a", rawPath)
	}

	t, size, err := measure(ctx, ref, pub, blobs, esp, a.Entry.Options, n)
	if err != nil {
		return err
	}
	sig, pull, write, hash, stage := t.sig, t.pull, t.write, t.hash, t.stage
	verify := make([]time.Duration, n)
	for i := range verify {
		verify[i] = sig[i] + hash[i]
	}
	var pulledBytes int
	for _, b := range blobs {
		pulledBytes += len(b)
	}
	fmt.Printf("staging of %s (%d MiB pulled: manifest, config, boot layer; %d MiB written), on the host, no emulation:\n",
		filepath.Base(ociPath), pulledBytes>>20, size>>20)
	fmt.Printf("  staging, all of it:          %s\n", stats.Durations(stage).Format("%.3fs"))
	fmt.Printf("    signature check:           %s\n", stats.Durations(sig).Format("%.3fs"))
	fmt.Printf("    pull (digests as it reads): %s\n", stats.Durations(pull).Format("%.3fs"))
	fmt.Printf("    slot write (flushed):      %s\n", stats.Durations(write).Format("%.3fs"))
	fmt.Printf("  SHA-256 of the pulled blobs: %s\n", stats.Durations(hash).Format("%.3fs"))
	fmt.Printf("  verification (digests + signature) / staging: %s\n", stats.Ratio(stats.Durations(verify), stats.Durations(stage)))
	v, sg := stats.Durations(verify), stats.Durations(stage)
	return figures.Record("verify",
		figures.Figure{Key: "verify.check", Name: "verifying an upgrade image (digests + signature), on the host", Value: v.Median, Unit: "s", N: v.N}.
			Ref("its whole staging (signature, pull, slot write)", sg.Median),
		figures.Figure{Key: "verify.staging", Name: "staging of an upgrade image, on the host", Value: sg.Median, Unit: "s", N: sg.N})
}

// timings are the durations of each measured staging.
type timings struct{ sig, pull, write, hash, stage []time.Duration }

// measure stages ref n times into slot b of the ESP directory esp (held,
// next to the builder's slot a with its options) and times each part; it
// returns the bytes staged.
func measure(ctx context.Context, ref name.Digest, pub crypto.PublicKey, blobs [][]byte, esp, options string, n int) (timings, int, error) {
	var t timings
	var size int
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := imagesig.Verify(ctx, ref, []crypto.PublicKey{pub}, remote.WithContext(ctx)); err != nil {
			return t, 0, fmt.Errorf("verify: %w", err)
		}
		t1 := time.Now()
		boot, err := upgrade.Fetch(ctx, ref.String(), upgrade.Options{Insecure: true})
		if err != nil {
			return t, 0, fmt.Errorf("pull: %w", err)
		}
		t2 := time.Now()
		if _, err := slot.Stage(slot.Dir(esp), "b", slot.Update{
			Kernel: bytes.NewReader(boot.Kernel), Initrd: bytes.NewReader(boot.Initrd), Options: options, Hold: true,
		}); err != nil {
			return t, 0, fmt.Errorf("stage: %w", err)
		}
		t3 := time.Now()
		size = len(boot.Kernel) + len(boot.Initrd)
		for _, b := range blobs {
			sha256.Sum256(b)
		}
		t4 := time.Now()
		t.sig, t.pull, t.write = append(t.sig, t1.Sub(t0)), append(t.pull, t2.Sub(t1)), append(t.write, t3.Sub(t2))
		t.hash, t.stage = append(t.hash, t4.Sub(t3)), append(t.stage, t3.Sub(t0))
	}
	return t, size, nil
}

// serveAndPush serves a registry on a loopback port for as long as the
// program runs, pushes img to it and returns its reference by digest.
func serveAndPush(ctx context.Context, img v1.Image) (name.Digest, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return name.Digest{}, err
	}
	go http.Serve(l, registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	ref, err := name.NewDigest(l.Addr().String()+"/etcdbox@"+d.String(), name.Insecure)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return name.Digest{}, fmt.Errorf("push: %w", err)
	}
	return ref, nil
}

func signingKey() (crypto.Signer, crypto.PublicKey, error) {
	priv, pubPEM, err := imagesig.GenerateKey()
	if err != nil {
		return nil, nil, err
	}
	key, err := imagesig.ParsePrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	pub, err := imagesig.ParsePublicKey(string(pubPEM))
	return key, pub, err
}

// pulledBlobs returns what a node's pull hashes: the manifest, the config
// and the last layer (the boot layer; upgrade.Fetch reads layers from the
// last back until it has the boot files, which the builder puts in the
// last).
func pulledBlobs(img v1.Image) ([][]byte, error) {
	m, err := img.RawManifest()
	if err != nil {
		return nil, err
	}
	c, err := img.RawConfigFile()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) == 0 {
		return nil, errors.New("the image has no layers")
	}
	rc, err := layers[len(layers)-1].Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	l, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	return [][]byte{m, c, l}, nil
}

// copyESP copies every file of the ESP of the raw disk image at raw into
// the directory dir.
func copyESP(raw, dir string) error {
	f, err := os.Open(raw)
	if err != nil {
		return err
	}
	defer f.Close()
	fsys, err := fat32.Read(file.New(f, true), espBytes, espOffset, 512)
	if err != nil {
		return fmt.Errorf("the ESP of %s: %w", raw, err)
	}
	return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		// go-diskfs cannot open an empty file (no first cluster).
		var b []byte
		if info, err := d.Info(); err != nil {
			return err
		} else if info.Size() > 0 {
			if b, err = fs.ReadFile(fsys, p); err != nil {
				return fmt.Errorf("%s: %w", path.Join("ESP", p), err)
			}
		}
		return os.WriteFile(dst, b, 0o644)
	})
}
