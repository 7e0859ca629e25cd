package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A pushed backup is an OCI artifact: an image manifest whose config is
// empty and whose one layer is the snapshot file as Save kept it (the
// database and its SHA-256), with what the snapshot holds in the
// manifest's annotations. It is addressed by digest; its tag (the kept
// file's name without .db) only lets a listing find it.
const (
	ConfigMediaType   types.MediaType = "application/vnd.etcdbox.backup.config.v1+json"
	SnapshotMediaType types.MediaType = "application/vnd.etcdbox.etcd-snapshot.v1"

	AnnotationCluster  = "org.etcdbox.backup.cluster"
	AnnotationMember   = "org.etcdbox.backup.member"
	AnnotationRevision = "org.etcdbox.backup.revision"
	AnnotationKeys     = "org.etcdbox.backup.keys"
	AnnotationSHA256   = "org.etcdbox.backup.sha256"
	AnnotationCreated  = "org.opencontainers.image.created"
	AnnotationTitle    = "org.opencontainers.image.title"
)

// Registry is how to reach a repository of pushed backups.
type Registry struct {
	// Repository is host[:port]/path.
	Repository string
	// Insecure speaks plain HTTP.
	Insecure bool
	// Username and Password are basic credentials; empty: anonymous.
	Username, Password string
}

func (r Registry) repo() (name.Repository, error) {
	var opts []name.Option
	if r.Insecure {
		opts = append(opts, name.Insecure)
	}
	return name.NewRepository(r.Repository, opts...)
}

func (r Registry) options(ctx context.Context) []remote.Option {
	auth := authn.Anonymous
	if r.Username != "" {
		auth = authn.FromConfig(authn.AuthConfig{Username: r.Username, Password: r.Password})
	}
	return []remote.Option{remote.WithContext(ctx), remote.WithAuth(auth)}
}

// Pushed is a backup in a registry.
type Pushed struct {
	// Ref is repository@sha256:..., what get and restore take.
	Ref      string
	Tag      string
	Cluster  string
	Member   string
	Revision int64
	Keys     int
	SHA256   string
	Size     int64
	Taken    time.Time
}

// Push pushes the kept snapshot s of cluster to r and returns its
// reference by digest.
func Push(ctx context.Context, r Registry, s Snapshot, cluster string) (string, error) {
	repo, err := r.repo()
	if err != nil {
		return "", err
	}
	l, err := newFileLayer(s.Path)
	if err != nil {
		return "", err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), ConfigMediaType)
	img, err = mutate.Append(img, mutate.Addendum{Layer: l, MediaType: SnapshotMediaType, Annotations: map[string]string{AnnotationTitle: s.Name}})
	if err != nil {
		return "", err
	}
	img = mutate.Annotations(img, map[string]string{
		AnnotationCluster:  cluster,
		AnnotationMember:   s.Member,
		AnnotationRevision: strconv.FormatInt(s.Revision, 10),
		AnnotationKeys:     strconv.Itoa(s.Keys),
		AnnotationSHA256:   s.SHA256,
		AnnotationCreated:  s.Taken.UTC().Format(time.RFC3339Nano),
	}).(v1.Image)
	tag := strings.TrimSuffix(s.Name, suffix)
	if err := remote.Write(repo.Tag(tag), img, r.options(ctx)...); err != nil {
		return "", fmt.Errorf("push %s to %s: %w", s.Name, r.Repository, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return repo.Digest(d.String()).String(), nil
}

// ListPushed lists the backups in r, oldest first.
func ListPushed(ctx context.Context, r Registry) ([]Pushed, error) {
	repo, err := r.repo()
	if err != nil {
		return nil, err
	}
	tags, err := remote.List(repo, r.options(ctx)...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", r.Repository, err)
	}
	var out []Pushed
	for _, tag := range tags {
		if !strings.HasPrefix(tag, prefix) {
			continue
		}
		desc, err := remote.Get(repo.Tag(tag), r.options(ctx)...)
		if err != nil {
			return nil, fmt.Errorf("%s:%s: %w", r.Repository, tag, err)
		}
		p, err := pushed(repo, desc)
		if err != nil {
			return nil, fmt.Errorf("%s:%s: %w", r.Repository, tag, err)
		}
		p.Tag = tag
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Taken.Before(out[j].Taken) })
	return out, nil
}

// ErrNotBackup: the reference is not an etcdbox backup artifact.
var ErrNotBackup = errors.New("not an etcdbox backup artifact")

func pushed(repo name.Repository, desc *remote.Descriptor) (Pushed, error) {
	m, err := v1.ParseManifest(strings.NewReader(string(desc.Manifest)))
	if err != nil {
		return Pushed{}, err
	}
	if m.Config.MediaType != ConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != SnapshotMediaType {
		return Pushed{}, ErrNotBackup
	}
	a := m.Annotations
	p := Pushed{Ref: repo.Digest(desc.Digest.String()).String(), Cluster: a[AnnotationCluster], Member: a[AnnotationMember], SHA256: a[AnnotationSHA256], Size: m.Layers[0].Size}
	p.Revision, _ = strconv.ParseInt(a[AnnotationRevision], 10, 64)
	p.Keys, _ = strconv.Atoi(a[AnnotationKeys])
	p.Taken, _ = time.Parse(time.RFC3339Nano, a[AnnotationCreated])
	return p, nil
}

// IsRef reports whether s names a pushed backup by digest
// (host[:port]/path@sha256:...), as opposed to a file or a kept name.
func IsRef(s string) bool { return strings.Contains(s, "/") && strings.Contains(s, "@sha256:") }

// Pull copies the backup ref (by digest) into w and returns what its
// annotations say; every byte is checked against the layer's digest as it
// is read. The caller verifies the file (Verify) and compares its SHA-256
// with Pushed.SHA256.
func Pull(ctx context.Context, r Registry, ref string, w io.Writer) (Pushed, error) {
	var opts []name.Option
	if r.Insecure {
		opts = append(opts, name.Insecure)
	}
	d, err := name.NewDigest(ref, opts...)
	if err != nil {
		return Pushed{}, fmt.Errorf("%s: want host[:port]/path@sha256:<digest>: %w", ref, err)
	}
	desc, err := remote.Get(d, r.options(ctx)...)
	if err != nil {
		return Pushed{}, fmt.Errorf("%s: %w", ref, err)
	}
	p, err := pushed(d.Context(), desc)
	if err != nil {
		return Pushed{}, fmt.Errorf("%s: %w", ref, err)
	}
	m, _ := v1.ParseManifest(strings.NewReader(string(desc.Manifest)))
	l, err := remote.Layer(d.Context().Digest(m.Layers[0].Digest.String()), r.options(ctx)...)
	if err != nil {
		return Pushed{}, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return Pushed{}, err
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		return Pushed{}, fmt.Errorf("%s: %w", ref, err)
	}
	return p, nil
}

// fileLayer is a kept snapshot file as a layer, read from the disk when
// pushed (a snapshot may be gigabytes; it is never held in memory).
type fileLayer struct {
	path   string
	size   int64
	digest v1.Hash
}

func newFileLayer(path string) (*fileLayer, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, err
	}
	return &fileLayer{path: path, size: n, digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}}, nil
}

func (l *fileLayer) Digest() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)             { return l.digest, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.path) }
func (l *fileLayer) Size() (int64, error)                 { return l.size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error)  { return SnapshotMediaType, nil }
