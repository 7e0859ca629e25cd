// Package testenv finds the artifacts that tests build on: the repository
// root, the binaries `make build` writes, and the kernel, OVMF and
// systemd-boot that hack/deps.sh unpacks into .cache/sysroot.
//
// A missing artifact fails the test with the command that makes it: tests
// are tiered by cost (go test -short), never skipped for want of inputs.
package testenv

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Root returns the repository root: the nearest parent holding go.mod.
func Root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Cache returns the dependency cache (ETCDBOX_CACHE or <root>/.cache).
func Cache(tb testing.TB) string {
	if c := os.Getenv("ETCDBOX_CACHE"); c != "" {
		return c
	}
	return filepath.Join(Root(tb), ".cache")
}

// InitrdCache is the cache of compressed initrd members the tests' image
// builds share (image.Config.CacheDir), beside the dependency cache: a
// build from the same binaries and modules does not compress them again.
func InitrdCache(tb testing.TB) string { return filepath.Join(Cache(tb), "initrd") }

// Sysroot is where hack/deps.sh unpacks the guest's Debian packages.
func Sysroot(tb testing.TB) string { return filepath.Join(Cache(tb), "sysroot") }

// Bin returns the path of bin/<name>, failing when `make build` has not
// made it.
func Bin(tb testing.TB, name string) string {
	tb.Helper()
	p := filepath.Join(Root(tb), "bin", name)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("testenv: %s is missing; run `make build`: %v", p, err)
	}
	return p
}

// Kernel returns the cached Debian kernel and its modules directory.
func Kernel(tb testing.TB) (vmlinuz, modules string) {
	tb.Helper()
	sr := Sysroot(tb)
	ks, _ := filepath.Glob(filepath.Join(sr, "boot", "vmlinuz-*"))
	if len(ks) == 0 {
		tb.Fatalf("testenv: no kernel under %s/boot; run hack/deps.sh", sr)
	}
	sort.Strings(ks)
	vmlinuz = ks[len(ks)-1]
	kver := filepath.Base(vmlinuz)[len("vmlinuz-"):]
	return vmlinuz, filepath.Join(sr, "lib", "modules", kver)
}

// File returns path, failing with hint when it does not exist.
func File(tb testing.TB, path, hint string) string {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		tb.Fatalf("testenv: %s is missing (%s): %v", path, hint, err)
	}
	return path
}

// Bootloader returns the cached systemd-boot EFI binary.
func Bootloader(tb testing.TB) string {
	return File(tb, filepath.Join(Sysroot(tb), "usr/lib/systemd/boot/efi/systemd-bootx64.efi"), "run hack/deps.sh")
}

// OVMF returns the cached OVMF code and variables templates.
func OVMF(tb testing.TB) (code, vars string) {
	d := filepath.Join(Sysroot(tb), "usr/share/OVMF")
	return File(tb, filepath.Join(d, "OVMF_CODE_4M.fd"), "run hack/deps.sh"),
		File(tb, filepath.Join(d, "OVMF_VARS_4M.fd"), "run hack/deps.sh")
}

// PreviousEtcd returns the previous etcd minor's version (hack/etcd-previous)
// and its binary, which `make build` writes to bin/etcd-VERSION.
func PreviousEtcd(tb testing.TB) (version, bin string) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Root(tb), "hack", "etcd-previous"))
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	version = strings.TrimSpace(string(b))
	return version, Bin(tb, "etcd-"+version)
}
