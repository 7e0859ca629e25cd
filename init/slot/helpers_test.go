package slot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"path"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// builderEntry is the entry the builder writes for slot a with the
// extras "etcdbox.debug=1" (CONTRACTS "Disk", image/esp.go bootEntry).
const builderEntry = "title etcdbox (slot a)\nversion 1\nsort-key etcdbox\nlinux /etcdbox/a/vmlinuz\n" +
	"initrd /etcdbox/a/initrd\noptions console=ttyS0,115200 panic=10 etcdbox.slot=a etcdbox.debug=1\n"

// builderOptions is the options line of builderEntry.
const builderOptions = "console=ttyS0,115200 panic=10 etcdbox.slot=a etcdbox.debug=1"

// loaderConf is the builder's loader.conf.
const loaderConf = "default etcdbox-*\ntimeout 0\neditor no\nauto-entries no\nauto-firmware no\n"

// blob returns n pseudo-random bytes derived from seed: kernels and
// initrds whose every byte is checked.
func blob(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// files is an ESP's content by path.
type files map[string][]byte

// builderESP returns the content of a fresh image's ESP, with small
// stand-ins for the bootloader, kernel and initrd.
func builderESP() files {
	return files{
		"EFI/BOOT/BOOTX64.EFI":          blob(1, 5000),
		"loader/loader.conf":            []byte(loaderConf),
		"loader/entries/etcdbox-a.conf": []byte(builderEntry),
		"etcdbox/a/vmlinuz":             blob(2, 70_000),
		"etcdbox/a/initrd":              blob(3, 150_000),
	}
}

// populate writes fs into fsys through the FS methods.
func populate(t testing.TB, fsys FS, content files) {
	t.Helper()
	for _, p := range sortedKeys(content) {
		dirs := strings.Split(path.Dir(p), "/")
		for i := range dirs {
			require.NoError(t, fsys.Mkdir(strings.Join(dirs[:i+1], "/")))
		}
		require.NoError(t, fsys.WriteFile(p, bytes.NewReader(content[p])))
	}
}

// snapshot reads every file of fsys.
func snapshot(t testing.TB, fsys FS) files {
	t.Helper()
	out := files{}
	var walk func(dir string)
	walk = func(dir string) {
		des, err := fsys.ReadDir(dir)
		require.NoError(t, err, "readdir %s", dir)
		for _, de := range des {
			p := path.Join(dir, de.Name())
			if de.IsDir() {
				walk(p)
				continue
			}
			out[p], err = fsys.ReadFile(p)
			require.NoError(t, err, "read %s", p)
		}
	}
	walk(".")
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// errPowerCut is what a crashFS returns from the cut on.
var errPowerCut = errors.New("power cut")

// A crashFS passes the first budget mutating operations to its FS and
// then loses power: the operation at the cut fails (a WriteFile leaves
// the first half of its data behind, as a torn write would) and every
// call after it fails. A negative budget never cuts; log records the
// operations that went through.
type crashFS struct {
	FS
	budget int
	cut    bool
	log    []string
}

// mutate runs one mutating operation under the power budget.
func (c *crashFS) mutate(op string, do func(last bool) error) error {
	if c.cut {
		return errPowerCut
	}
	if c.budget == 0 {
		c.cut = true
		_ = do(true)
		return errPowerCut
	}
	c.budget--
	c.log = append(c.log, op)
	return do(false)
}

func (c *crashFS) WriteFile(name string, r io.Reader) error {
	return c.mutate("write "+name, func(last bool) error {
		if !last {
			return c.FS.WriteFile(name, r)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		return c.FS.WriteFile(name, bytes.NewReader(data[:(len(data)+1)/2]))
	})
}

func (c *crashFS) Rename(oldname, newname string) error {
	return c.mutate("rename "+oldname+" "+path.Base(newname), func(last bool) error {
		if last {
			return nil
		}
		return c.FS.Rename(oldname, newname)
	})
}

func (c *crashFS) Remove(name string) error {
	return c.mutate("remove "+name, func(last bool) error {
		if last {
			return nil
		}
		return c.FS.Remove(name)
	})
}

func (c *crashFS) Mkdir(name string) error {
	return c.mutate("mkdir "+name, func(last bool) error {
		if last {
			return nil
		}
		return c.FS.Mkdir(name)
	})
}

func (c *crashFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if c.cut {
		return nil, errPowerCut
	}
	return c.FS.ReadDir(name)
}

func (c *crashFS) ReadFile(name string) ([]byte, error) {
	if c.cut {
		return nil, errPowerCut
	}
	return c.FS.ReadFile(name)
}

// failFS fails the mutating operation op (as crashFS logs it) with err.
type failFS struct {
	FS
	op  string
	err error
}

func (f failFS) Remove(name string) error {
	if f.op == "remove "+name {
		return &fs.PathError{Op: "remove", Path: "/boot/efi/" + name, Err: f.err}
	}
	return f.FS.Remove(name)
}

func (f failFS) WriteFile(name string, r io.Reader) error {
	if f.op == "write "+name {
		return &fs.PathError{Op: "open", Path: "/boot/efi/" + name, Err: f.err}
	}
	return f.FS.WriteFile(name, r)
}

// describe prints a State for failure messages.
func describe(st State) string {
	var b strings.Builder
	for _, name := range names {
		s := st.Slots[name]
		fmt.Fprintf(&b, "slot %s: %s", name, s.Status())
		if s.Entry != nil {
			fmt.Fprintf(&b, " %s gen %d err %v", s.Entry.File, s.Entry.Generation, s.Entry.Err)
		}
		fmt.Fprintf(&b, " kernel %v initrd %v extra %d; ", s.Kernel, s.Initrd, len(s.Extra))
	}
	return b.String()
}
