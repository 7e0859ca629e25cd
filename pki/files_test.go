package pki

import (
	"crypto/x509"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, name := range InitFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		m[name] = b
	}
	return m
}

func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	require.NoError(t, Init(dir, false))

	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, fs.ModeDir|0o700, st.Mode(), "mode of %s", dir)

	modes := map[string]fs.FileMode{CACertFile: 0o644, CAKeyFile: 0o600, AdminCertFile: 0o644, AdminKeyFile: 0o600}
	for name, want := range modes {
		st, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, want, st.Mode(), "mode of %s", name)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, len(InitFiles), "no temporary files left behind")

	files := readFiles(t, dir)
	ca, err := LoadCAFiles(dir)
	require.NoError(t, err)
	assert.Equal(t, CACommonName, ca.Cert.Subject.CommonName)

	admin, err := ParseCertPEM(files[AdminCertFile])
	require.NoError(t, err)
	assert.Equal(t, AdminCommonName, admin.Subject.CommonName)
	key, err := ParseKeyPEM(files[AdminKeyFile])
	require.NoError(t, err)
	assert.NoError(t, KeyMatches(admin, key))

	// Admin: client auth only.
	assert.NoError(t, verify(t, files[CACertFile], files[AdminCertFile], x509.ExtKeyUsageClientAuth))
	assert.Error(t, verify(t, files[CACertFile], files[AdminCertFile], x509.ExtKeyUsageServerAuth))

	// A server leaf issued from the files verifies for both.
	dns, ips := NodeSANs("n1", nil, nil)
	certPEM, _, err := ca.Issue(Leaf{CommonName: "n1", DNSNames: dns, IPs: ips, Server: true, Client: true})
	require.NoError(t, err)
	assert.NoError(t, verify(t, files[CACertFile], certPEM, x509.ExtKeyUsageServerAuth))
	assert.NoError(t, verify(t, files[CACertFile], certPEM, x509.ExtKeyUsageClientAuth))
}

func TestInitRefusesExisting(t *testing.T) {
	for _, name := range InitFiles {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, name)
			require.NoError(t, os.WriteFile(p, []byte("precious"), 0o600))

			err := Init(dir, false)
			require.ErrorIs(t, err, fs.ErrExist)
			assert.ErrorContains(t, err, p)
			assert.ErrorContains(t, err, "--force")

			b, err := os.ReadFile(p)
			require.NoError(t, err)
			assert.Equal(t, "precious", string(b), "existing file untouched")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Len(t, entries, 1, "nothing else written")
		})
	}
}

func TestInitForce(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, Init(dir, false))
	old := readFiles(t, dir)
	require.Error(t, Init(dir, false))
	assert.Equal(t, old, readFiles(t, dir), "refusal leaves the files alone")

	require.NoError(t, Init(dir, true))
	fresh := readFiles(t, dir)
	for _, name := range InitFiles {
		assert.NotEqual(t, old[name], fresh[name], "%s replaced", name)
	}
	// The new admin certificate belongs to the new CA, not the old one.
	assert.NoError(t, verify(t, fresh[CACertFile], fresh[AdminCertFile], x509.ExtKeyUsageClientAuth))
	assert.Error(t, verify(t, old[CACertFile], fresh[AdminCertFile], x509.ExtKeyUsageClientAuth))
}

func TestInitUnwritable(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	err := Init(filepath.Join(blocker, "pki"), false)
	assert.ErrorContains(t, err, blocker)
}

func TestLoadCAFilesErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadCAFiles(dir)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorContains(t, err, filepath.Join(dir, CACertFile))

	require.NoError(t, Init(dir, false))
	require.NoError(t, os.WriteFile(filepath.Join(dir, CAKeyFile), []byte("junk"), 0o600))
	_, err = LoadCAFiles(dir)
	assert.ErrorContains(t, err, filepath.Join(dir, CAKeyFile))
	assert.ErrorContains(t, err, "no PEM block found")
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "leaf.crt")
	require.NoError(t, WriteFileAtomic(p, []byte("one"), 0o600))
	require.NoError(t, WriteFileAtomic(p, []byte("two"), 0o644))

	b, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "two", string(b))
	st, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o644), st.Mode())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary files left behind")

	err = WriteFileAtomic(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorContains(t, err, filepath.Join(dir, "missing", "x"))
}

func TestWriteFilesAtomic(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteFileAtomic(filepath.Join(dir, "server.key"), []byte("old key"), 0o600))
	require.NoError(t, WriteFilesAtomic(dir,
		File{Name: "server.key", Data: []byte("key"), Mode: 0o600},
		File{Name: "server.crt", Data: []byte("cert"), Mode: 0o644}))
	for name, want := range map[string]string{"server.key": "key", "server.crt": "cert"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, want, string(b))
	}
	st, err := os.Stat(filepath.Join(dir, "server.crt"))
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o644), st.Mode())

	// One file that cannot be written (a name longer than the
	// filesystem takes): none of the set is replaced.
	err = WriteFilesAtomic(dir,
		File{Name: "server.key", Data: []byte("newer key"), Mode: 0o600},
		File{Name: strings.Repeat("x", 300), Data: []byte("newer cert"), Mode: 0o644})
	assert.ErrorIs(t, err, syscall.ENAMETOOLONG)
	b, err := os.ReadFile(filepath.Join(dir, "server.key"))
	require.NoError(t, err)
	assert.Equal(t, "key", string(b), "the set is written whole or not at all")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "no temporary files left behind")
}

func TestWriteFilesAtomicNames(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"", ".", "..", "sub/x.crt", "../x.crt"} {
		err := WriteFilesAtomic(dir, File{Name: name, Data: []byte("x"), Mode: 0o600})
		assert.ErrorContains(t, err, "not a file name", "%q", name)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
}
