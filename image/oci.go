package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// writeLayer writes t as a gzip tar layer of the given compression level:
// sorted, owned by root, every time stamp the epoch. Device nodes are left
// out: container runtimes provide /dev, and rootless unpackers cannot
// create them.
func writeLayer(ctx context.Context, w io.Writer, t *tree, epoch int64, level int) error {
	zw, err := gzip.NewWriterLevel(w, level)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	mtime := time.Unix(epoch, 0).UTC()
	for _, n := range t.sorted() {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr := &tar.Header{Name: n.path, Mode: int64(cpioMode(n.mode) & 0o7777), ModTime: mtime, Format: tar.FormatPAX}
		switch {
		case n.mode.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, n.path+"/"
		case n.mode.Type() == fs.ModeSymlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, n.target
		case n.mode.Type() == 0:
			hdr.Typeflag, hdr.Size = tar.TypeReg, n.size
		default:
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write /%s: %w", n.path, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		r, err := n.open()
		if err != nil {
			return fmt.Errorf("write /%s: %w", n.path, err)
		}
		copied, err := io.Copy(tw, io.LimitReader(r, n.size))
		r.Close()
		if err == nil && copied != n.size {
			err = fmt.Errorf("%s shrank from %d to %d bytes while being archived", n.src, n.size, copied)
		}
		if err != nil {
			return fmt.Errorf("write /%s: %w", n.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// gzipLayer is t as an OCI gzip layer.
func gzipLayer(ctx context.Context, t *tree, epoch int64, level int) (v1.Layer, error) {
	var gz bytes.Buffer
	if err := writeLayer(ctx, &gz, t, epoch, level); err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// ociImage returns the OCI image of cfg, /init as the entrypoint, in two
// layers:
//
//  1. the container root t, gzip-compressed;
//  2. /boot/vmlinuz, /boot/initrd and /boot/cmdline, what the upgrade
//     agent stages into a slot, in gzip's stored blocks (level 0): both
//     files are compressed already, and a node then pulls this layer only
//     and inflates nothing (init/upgrade reads layers from the last one
//     back). A stored gzip rather than a plain tar layer, because every
//     tool and runtime takes gzip layers, and some (docker's save format,
//     go-containerregistry's validator) take nothing else.
//
// /boot/cmdline holds cfg.Cmdline, the image's extra kernel command-line
// arguments, on one line ending in a newline; it is empty when there are
// none, and always present, so the layer lists the same files either way.
func ociImage(ctx context.Context, cfg Config, t *tree, initrd []byte) (v1.Image, error) {
	boot := newTree()
	if err := boot.file("boot/vmlinuz", cfg.Kernel, 0o644); err != nil {
		return nil, fmt.Errorf("kernel %s: %w", cfg.Kernel, err)
	}
	if err := boot.bytes("boot/initrd", initrd, 0o644); err != nil {
		return nil, err
	}
	if err := boot.bytes("boot/cmdline", cmdlineFile(cfg.Cmdline), 0o644); err != nil {
		return nil, err
	}
	layer, err := gzipLayer(ctx, t, cfg.SourceDateEpoch, gzip.DefaultCompression)
	if err != nil {
		return nil, fmt.Errorf("write layer: %w", err)
	}
	bootLayer, err := gzipLayer(ctx, boot, cfg.SourceDateEpoch, gzip.NoCompression)
	if err != nil {
		return nil, fmt.Errorf("write boot layer: %w", err)
	}
	created := v1.Time{Time: time.Unix(cfg.SourceDateEpoch, 0).UTC()}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: "etcdbox build", Comment: "etcdbox " + cfg.Version},
	}, mutate.Addendum{
		Layer:   bootLayer,
		History: v1.History{Created: created, CreatedBy: "etcdbox build", Comment: "boot files"},
	})
	if err != nil {
		return nil, fmt.Errorf("assemble image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("assemble image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created, cf.Architecture, cf.OS = created, "amd64", "linux"
	cf.Config.Entrypoint = []string{"/init"}
	cf.Config.Env = []string{"PATH=/usr/sbin:/usr/bin"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.version": cfg.Version,
		"io.etcdbox.kernel":                filepath.Base(cfg.Modules),
		"io.etcdbox.etcd":                  etcdVersion(cfg.etcdBinary()),
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, fmt.Errorf("assemble image: %w", err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
}

// cmdlineFile is the content of /boot/cmdline for the extras: the
// arguments separated by single spaces, then a newline; empty for none.
func cmdlineFile(extras string) []byte {
	f := strings.Join(strings.Fields(extras), " ")
	if f == "" {
		return nil
	}
	return []byte(f + "\n")
}

// refName is the name an OCI tarball or layout records for the image: the
// push reference, else etcdbox:<version>.
func refName(cfg Config) (name.Reference, error) {
	if cfg.Push != "" {
		return name.ParseReference(cfg.Push)
	}
	tag := strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '-'
	}, cfg.Version)
	return name.NewTag("etcdbox:" + strings.TrimLeft(tag, ".-"))
}

// writeOCI writes the OCI image of cfg to cfg.Output (a tarball when the
// name ends in ".tar", else an image layout directory) and pushes it to
// cfg.Push. It returns the manifest digest.
func writeOCI(ctx context.Context, cfg Config, t *tree, initrd []byte) (string, error) {
	ref, err := refName(cfg)
	if err != nil {
		return "", fmt.Errorf("image name: %w", err)
	}
	img, err := ociImage(ctx, cfg, t, initrd)
	if err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", fmt.Errorf("image digest: %w", err)
	}
	switch {
	case cfg.Output == "":
	case strings.HasSuffix(cfg.Output, ".tar"):
		err = writeOCITarball(cfg.Output, ref, img, cfg.Seed != "")
	default:
		err = writeOCILayout(cfg.Output, ref, img, cfg.Seed != "")
	}
	if err != nil {
		return "", err
	}
	if cfg.Push != "" {
		err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
		if err != nil {
			return "", fmt.Errorf("push %s: %w", cfg.Push, err)
		}
	}
	return digest.String(), nil
}

func writeOCITarball(out string, ref name.Reference, img v1.Image, secret bool) (err error) {
	f, p, err := pendingFile(out)
	if err != nil {
		return err
	}
	p.secret = secret
	defer func() {
		if err != nil {
			f.Close()
			p.abort()
		}
	}()
	if err := tarball.Write(ref, img, f); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return p.commit()
}

func writeOCILayout(out string, ref name.Reference, img v1.Image, secret bool) (err error) {
	p, err := pendingDir(out)
	if err != nil {
		return err
	}
	p.secret = secret
	defer func() {
		if err != nil {
			p.abort()
		}
	}()
	lp, err := layout.Write(p.tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	ann := map[string]string{"org.opencontainers.image.ref.name": ref.Identifier()}
	if err := lp.AppendImage(img, layout.WithAnnotations(ann)); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return p.commit()
}
