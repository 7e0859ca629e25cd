package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// File names written by Init and read by LoadCAFiles.
const (
	CACertFile    = "ca.crt"
	CAKeyFile     = "ca.key"
	AdminCertFile = "admin.crt"
	AdminKeyFile  = "admin.key"
)

// InitFiles lists, in order, the files Init writes into its directory.
var InitFiles = []string{CACertFile, CAKeyFile, AdminCertFile, AdminKeyFile}

const (
	// CACommonName is the common name of the CA made by Init.
	CACommonName = "etcdbox-ca"
	// AdminCommonName is the common name of the admin client certificate.
	AdminCommonName = "etcdbox-admin"
	// AdminValidity is the lifetime of the admin certificate made by Init.
	// It is longer than DefaultLeafValidity because nodes renew their own
	// leaves, but the admin certificate is the operator's credential and is
	// replaced by hand.
	AdminValidity = 365 * 24 * time.Hour
)

// Init makes a new cluster CA and an admin client certificate in dir and
// writes ca.crt, ca.key, admin.crt and admin.key (keys mode 0600, certificates
// 0644). It creates dir with mode 0700 if needed. Unless force is set, it
// refuses to run when any of these files exists, so that an existing CA is
// never replaced by accident; that error wraps fs.ErrExist.
func Init(dir string, force bool) error {
	return InitNamed(dir, CACommonName, force)
}

// InitNamed is Init with the CA's common name: a CA that is to replace
// another (etcdbox pki rotate-ca) needs a name of its own, so that a
// client holding both admin certificates can present the one a server
// asks for (TLS names the acceptable CAs by subject).
func InitNamed(dir, commonName string, force bool) error {
	if !force {
		for _, name := range InitFiles {
			p := filepath.Join(dir, name)
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("pki init: %s: %w; pass --force to replace the CA and admin certificate", p, fs.ErrExist)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("pki init: %w", err)
			}
		}
	}
	ca, err := NewCA(commonName, 0)
	if err != nil {
		return fmt.Errorf("pki init: %w", err)
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return fmt.Errorf("pki init: %w", err)
	}
	adminCert, adminKey, err := ca.IssueAdmin(AdminCommonName, AdminValidity)
	if err != nil {
		return fmt.Errorf("pki init: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki init: %w", err)
	}
	err = writeFilesAtomic(dir, []File{
		{CACertFile, ca.CertPEM(), 0o644},
		{CAKeyFile, caKey, 0o600},
		{AdminCertFile, adminCert, 0o644},
		{AdminKeyFile, adminKey, 0o600},
	})
	if err != nil {
		return fmt.Errorf("pki init: %w", err)
	}
	return nil
}

// LoadCAFiles loads the CA that Init wrote into dir.
func LoadCAFiles(dir string) (*CA, error) {
	certPath, keyPath := filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	ca, err := LoadCA(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", certPath, keyPath, err)
	}
	return ca, nil
}

// WriteFileAtomic replaces path with data and the exact mode (the umask does
// not apply): it writes a temporary file in the same directory, syncs it,
// renames it over path and syncs the directory. Readers see the old content
// or the new, never a mix; etcd re-reads leaf files on each handshake, so a
// renewal goes through here.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return writeFilesAtomic(filepath.Dir(path), []File{{filepath.Base(path), data, mode}})
}

// File is one file of WriteFilesAtomic.
type File struct {
	Name string // its name in the directory
	Data []byte
	Mode os.FileMode
}

// WriteFilesAtomic writes files into dir as WriteFileAtomic writes each,
// as one set: every file goes to a synced temporary file first, the
// renames follow only once all were written (a full disk leaves the old
// set untouched), and one sync of dir makes them durable together. A
// node's leaves and keys go through here: one directory sync for the set
// rather than one per file, and a crash while the files are written
// leaves the old set whole (only the renames, quick and once every file
// is on disk, can be cut between two).
func WriteFilesAtomic(dir string, files ...File) error {
	for _, f := range files {
		if f.Name == "" || f.Name == "." || f.Name == ".." || f.Name != filepath.Base(f.Name) {
			return fmt.Errorf("write %q in %s: not a file name", f.Name, dir)
		}
	}
	return writeFilesAtomic(dir, files)
}

func writeFilesAtomic(dir string, files []File) (err error) {
	// The rename would replace a device node, a pipe or a socket with a
	// regular file (-o /dev/null): only regular files are replaced.
	for _, f := range files {
		dst := filepath.Join(dir, f.Name)
		if fi, err := os.Lstat(dst); err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("write %s: not a regular file (%s); refusing to replace it", dst, fi.Mode().Type())
		}
	}
	temps := make([]string, 0, len(files))
	defer func() {
		if err != nil {
			for _, t := range temps {
				os.Remove(t)
			}
		}
	}()
	for _, f := range files {
		t, err := writeTemp(dir, f)
		if err != nil {
			return err
		}
		temps = append(temps, t)
	}
	for i, f := range files {
		if err := os.Rename(temps[i], filepath.Join(dir, f.Name)); err != nil {
			return fmt.Errorf("write %s: %w", filepath.Join(dir, f.Name), err)
		}
	}
	temps = nil
	return syncDir(dir)
}

func writeTemp(dir string, f File) (string, error) {
	dst := filepath.Join(dir, f.Name)
	tmp, err := os.CreateTemp(dir, "."+f.Name+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", dst, err)
	}
	name := tmp.Name()
	fail := func(err error) (string, error) {
		tmp.Close()
		os.Remove(name)
		return "", fmt.Errorf("write %s: %w", dst, err)
	}
	if err := tmp.Chmod(f.Mode); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(f.Data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return "", fmt.Errorf("write %s: %w", dst, err)
	}
	return name, nil
}

// syncDir makes renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
