package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// RegistryBlobDir is where, under D/net, the cluster registry keeps its
// blobs: one file per blob, named by its digest (sha256/<hex>).
const RegistryBlobDir = "blobs"

// blobStore keeps the registry's blobs on disk rather than in the network
// daemon's memory: a roll test pushes half a dozen images of 100 MiB and
// more, and the daemon lives as long as the cluster.
//
// It does not hash a blob when it serves it (go-containerregistry's disk
// handler rehashes on every Stat, so every pull reads each layer twice).
// What a registry serves is never trusted anyway: a node checks every
// byte it stages against the digest it pinned (issue 11). Uploads are
// checked: the registry verifies them while Put writes them, and a Put
// that fails leaves nothing behind.
type blobStore struct{ dir string }

var (
	_ registry.BlobStatHandler   = blobStore{}
	_ registry.BlobPutHandler    = blobStore{}
	_ registry.BlobDeleteHandler = blobStore{}
)

func (s blobStore) path(h v1.Hash) string { return filepath.Join(s.dir, h.Algorithm, h.Hex) }

// Stat returns the blob's size.
func (s blobStore) Stat(_ context.Context, _ string, h v1.Hash) (int64, error) {
	fi, err := os.Stat(s.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, registry.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// Get opens the blob.
func (s blobStore) Get(_ context.Context, _ string, h v1.Hash) (io.ReadCloser, error) {
	f, err := os.Open(s.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, registry.ErrNotFound
	}
	return f, err
}

// Put writes the blob under a temporary name and renames it into place
// once rc, which verifies its digest as it is read, reached its end.
func (s blobStore) Put(_ context.Context, _ string, h v1.Hash, rc io.ReadCloser) error {
	defer rc.Close()
	dir := filepath.Join(s.dir, h.Algorithm)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(f, rc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), s.path(h))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("blob %s: %w", h, err)
	}
	return nil
}

// Delete removes the blob.
func (s blobStore) Delete(_ context.Context, _ string, h v1.Hash) error {
	err := os.Remove(s.path(h))
	if errors.Is(err, fs.ErrNotExist) {
		return registry.ErrNotFound
	}
	return err
}

// RegistryBlob returns the file that holds the blob h in the registry of
// the cluster in dir, present or not.
func RegistryBlob(dir string, h v1.Hash) string {
	return blobStore{filepath.Join(dir, NetDir, RegistryBlobDir)}.path(h)
}
