package image

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// kernelVersion reads the release string ("6.1.0-57-amd64") from the
// setup header of an x86 bzImage (Documentation/arch/x86/boot.rst: the
// "HdrS" magic at 0x202, and at 0x20e the offset, minus 0x200, of a
// NUL-terminated version string).
func kernelVersion(vmlinuz string) (string, error) {
	f, err := os.Open(vmlinuz)
	if err != nil {
		return "", err
	}
	defer f.Close()
	hdr := make([]byte, 0x210)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return "", fmt.Errorf("%s is not a bzImage: %w", vmlinuz, err)
	}
	if string(hdr[0x202:0x206]) != "HdrS" {
		return "", fmt.Errorf("%s is not a bzImage: no HdrS setup header", vmlinuz)
	}
	off := int64(binary.LittleEndian.Uint16(hdr[0x20e:])) + 0x200
	buf := make([]byte, 256)
	n, err := f.ReadAt(buf, off)
	if n == 0 {
		return "", fmt.Errorf("read version string of %s: %w", vmlinuz, err)
	}
	buf = buf[:n]
	if i := bytes.IndexAny(buf, " \x00"); i >= 0 {
		buf = buf[:i]
	}
	if len(buf) == 0 {
		return "", fmt.Errorf("%s has an empty version string", vmlinuz)
	}
	return string(buf), nil
}

// FindKernel returns the newest kernel under root (root/boot/vmlinuz-*,
// compared as versions) that has a modules directory
// root/lib/modules/<release>.
func FindKernel(root string) (vmlinuz, modules string, err error) {
	ks, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	sort.Slice(ks, func(i, j int) bool { return versionLess(ks[j], ks[i]) })
	for _, k := range ks {
		kver := strings.TrimPrefix(filepath.Base(k), "vmlinuz-")
		mods := filepath.Join(root, "lib", "modules", kver)
		if _, err := os.Stat(filepath.Join(mods, "modules.dep")); err == nil {
			return k, mods, nil
		}
	}
	return "", "", fmt.Errorf("no kernel with modules under %s (want boot/vmlinuz-<release> and lib/modules/<release>/modules.dep)", root)
}

// BootloaderPath is where Debian's systemd-boot-efi package puts the EFI
// binary, below root.
func BootloaderPath(root string) string {
	return filepath.Join(root, "usr/lib/systemd/boot/efi/systemd-bootx64.efi")
}

// versionLess compares strings the way sort -V does for kernel releases:
// runs of digits compare as numbers ("6.1.0-9" < "6.1.0-10").
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		na, ra := splitRun(a)
		nb, rb := splitRun(b)
		if na != nb {
			ia, errA := strconv.Atoi(na)
			ib, errB := strconv.Atoi(nb)
			if errA == nil && errB == nil && ia != ib {
				return ia < ib
			}
			if errA != nil || errB != nil {
				return na < nb
			}
		}
		a, b = ra, rb
	}
	return len(a) < len(b)
}

// splitRun splits off the leading run of digits or of non-digits.
func splitRun(s string) (run, rest string) {
	digit := func(c byte) bool { return c >= '0' && c <= '9' }
	i := 1
	for i < len(s) && digit(s[i]) == digit(s[0]) {
		i++
	}
	return s[:i], s[i:]
}
