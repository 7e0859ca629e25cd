package upgrade

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Boot files inside the image.
const (
	KernelPath  = "boot/vmlinuz"
	InitrdPath  = "boot/initrd"
	CmdlinePath = "boot/cmdline"
)

// maxCmdline bounds /boot/cmdline; the kernel takes 2 KiB on x86 anyway.
const maxCmdline = 4096

// maxBootFile bounds what the agent reads for one boot file, so a hostile
// image cannot fill the ESP or memory.
const maxBootFile = 256 << 20

// ErrNoDigest means a reference names a tag, not a digest.
var ErrNoDigest = errors.New("the image reference must be pinned by digest (repo@sha256:...)")

// Boot is what an image carries for a slot.
type Boot struct {
	Digest string // the manifest digest that was pulled
	Kernel []byte
	Initrd []byte
	// Cmdline is the image's extra kernel command-line arguments, from
	// /boot/cmdline, separated by single spaces; empty when the image has
	// none or predates the file.
	Cmdline string
}

// Bounds on what an image may make a node pull and inflate. A boot layer
// is two compressed files of at most maxBootFile each; the root layer of
// an image from before the boot layer existed is about 100 MB of tar.
const (
	// DefaultMaxLayer bounds a layer's size as its manifest gives it,
	// checked before any layer is pulled.
	DefaultMaxLayer = 1 << 30
	// DefaultMaxUncompressed bounds the bytes a layer may inflate to (a
	// gzip bomb stops there).
	DefaultMaxUncompressed = 2 << 30
)

// ErrTooLarge means an image is over one of the bounds (wrapped).
var ErrTooLarge = errors.New("over the limit")

// Options configure Fetch.
type Options struct {
	// Insecure allows plain HTTP to the registry (a closed local network:
	// every byte read is still checked against the pinned digest).
	Insecure bool
	// Remote are extra go-containerregistry options (transport, auth).
	Remote []remote.Option
	// MaxLayer and MaxUncompressed override DefaultMaxLayer and
	// DefaultMaxUncompressed when positive.
	MaxLayer, MaxUncompressed int64
}

func (o Options) maxLayer() int64 {
	if o.MaxLayer > 0 {
		return o.MaxLayer
	}
	return DefaultMaxLayer
}

func (o Options) maxUncompressed() int64 {
	if o.MaxUncompressed > 0 {
		return o.MaxUncompressed
	}
	return DefaultMaxUncompressed
}

// ParseRef checks that ref is a digest reference and returns it.
func ParseRef(ref string, insecure bool) (name.Digest, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	d, err := name.NewDigest(ref, opts...)
	if err != nil {
		if _, terr := name.ParseReference(ref, opts...); terr == nil {
			return name.Digest{}, fmt.Errorf("image %s: %w", ref, ErrNoDigest)
		}
		return name.Digest{}, fmt.Errorf("image %s: %w", ref, err)
	}
	return d, nil
}

// Fetch pulls the image at ref and returns its boot files. Nothing is
// returned unless every byte used was checked against the pinned digest:
// the manifest, the config (and its platform), and each layer read, to its
// end; a size or digest mismatch, an index where an image manifest
// belongs, or an image over the bounds of o is an error naming it.
func Fetch(ctx context.Context, ref string, o Options) (*Boot, error) {
	d, err := ParseRef(ref, o.Insecure)
	if err != nil {
		return nil, err
	}
	opts := append([]remote.Option{remote.WithContext(ctx)}, o.Remote...)
	// go-containerregistry checks the manifest it fetches by digest
	// against that digest.
	desc, err := remote.Get(d, opts...)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	if desc.Digest.String() != d.DigestStr() {
		return nil, fmt.Errorf("pull %s: registry served manifest %s", ref, desc.Digest)
	}
	if desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("pull %s: %s is an image index (a manifest list), not an image: pin the digest of the linux/amd64 image in it", ref, desc.MediaType)
	}
	if !desc.MediaType.IsImage() {
		return nil, fmt.Errorf("pull %s: media type %q is not an image manifest", ref, desc.MediaType)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	if err := checkImage(img, o); err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	return bootFiles(img, ref, d.DigestStr(), o)
}

// checkImage checks the manifest's layer sizes against the bounds, and
// reads the config, which go-containerregistry checks against the
// manifest's config digest and size.
func checkImage(img v1.Image, o Options) error {
	m, err := img.Manifest()
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	if len(m.Layers) == 0 {
		return errors.New("no layers: not an etcdbox image")
	}
	for i, l := range m.Layers {
		if l.Size < 0 || l.Size > o.maxLayer() {
			return fmt.Errorf("layer %d is %d bytes by its manifest: %w of %d", i, l.Size, ErrTooLarge, o.maxLayer())
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("config %s: %w", m.Config.Digest, err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		return fmt.Errorf("config: platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	return nil
}

// bootFiles reads /boot/vmlinuz, /boot/initrd and /boot/cmdline from the
// image's layers, as an unpacked image would show them: a later layer's
// file wins. Layers are read from the last one back, until all three are
// found.
func bootFiles(img v1.Image, ref, digest string, o Options) (*Boot, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("image %s: layers: %w", ref, err)
	}
	b := &Boot{Digest: digest}
	var found bootFound
	for i := len(layers) - 1; i >= 0 && !found.all(); i-- {
		var lb Boot
		var lf bootFound
		if err := readLayer(layers[i], &lb, &lf, o.maxUncompressed()); err != nil {
			return nil, fmt.Errorf("image %s: layer %d: %w", ref, i, err)
		}
		if lf.kernel && !found.kernel {
			b.Kernel, found.kernel = lb.Kernel, true
		}
		if lf.initrd && !found.initrd {
			b.Initrd, found.initrd = lb.Initrd, true
		}
		if lf.cmdline && !found.cmdline {
			b.Cmdline, found.cmdline = lb.Cmdline, true
		}
	}
	switch {
	case len(b.Kernel) == 0:
		return nil, fmt.Errorf("image %s: no /%s: not an etcdbox image", ref, KernelPath)
	case len(b.Initrd) == 0:
		return nil, fmt.Errorf("image %s: no /%s: not an etcdbox image", ref, InitrdPath)
	}
	if strings.ContainsFunc(b.Cmdline, func(r rune) bool { return r < ' ' && r != '\t' && r != '\n' || r == 0x7f }) {
		return nil, fmt.Errorf("image %s: /%s holds control characters", ref, CmdlinePath)
	}
	if strings.Contains(strings.TrimRight(b.Cmdline, "\n"), "\n") {
		return nil, fmt.Errorf("image %s: /%s is more than one line", ref, CmdlinePath)
	}
	b.Cmdline = strings.Join(strings.Fields(b.Cmdline), " ")
	return b, nil
}

// bootFound says which boot files a layer, or the layers so far, held.
type bootFound struct{ kernel, initrd, cmdline bool }

func (f bootFound) all() bool { return f.kernel && f.initrd && f.cmdline }

// readLayer scans one layer, and reads it to its end so that its digest
// is checked, inflating at most limit bytes.
func readLayer(l v1.Layer, b *Boot, f *bootFound, limit int64) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	lr := &io.LimitedReader{R: rc, N: limit + 1}
	if err := scanLayer(lr, b, f); err != nil {
		return overLimit(lr, limit, err)
	}
	// The tar's end is not the blob's: padding may follow, and the
	// digest is checked only at the blob's end.
	if _, err := io.Copy(io.Discard, lr); err != nil {
		return err
	}
	return overLimit(lr, limit, nil)
}

// overLimit turns a read that hit the limit into ErrTooLarge.
func overLimit(lr *io.LimitedReader, limit int64, err error) error {
	if lr.N <= 0 {
		return fmt.Errorf("inflates to more than %d bytes: %w", limit, ErrTooLarge)
	}
	return err
}

func scanLayer(r io.Reader, b *Boot, f *bootFound) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var dst *[]byte
		limit := int64(maxBootFile)
		var cmdline []byte
		var seen *bool
		switch path.Clean("/" + h.Name) {
		case "/" + KernelPath:
			dst, seen = &b.Kernel, &f.kernel
		case "/" + InitrdPath:
			dst, seen = &b.Initrd, &f.initrd
		case "/" + CmdlinePath:
			dst, limit, seen = &cmdline, maxCmdline, &f.cmdline
		default:
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return fmt.Errorf("/%s is not a regular file", h.Name)
		}
		if h.Size > limit {
			return fmt.Errorf("/%s is %d bytes, more than %d", h.Name, h.Size, limit)
		}
		data, err := io.ReadAll(io.LimitReader(tr, limit+1))
		if err != nil {
			return fmt.Errorf("read /%s: %w", h.Name, err)
		}
		*dst, *seen = data, true
		if dst == &cmdline {
			b.Cmdline = string(cmdline)
		}
	}
}
