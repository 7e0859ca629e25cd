package image

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// DefaultDrivers is the driver set every image carries: storage and
// network for virtio (QEMU, most clouds), NVMe and AHCI (bare metal, EBS),
// ENA (AWS), gVNIC (GCE), Hyper-V (Azure), VMware, Intel e1000/e1000e,
// the ext4 and vfat filesystems with the code pages vfat mounts need, the
// i6300esb watchdog QEMU offers, the ACPI power button and evdev (clean
// shutdown), efivarfs, a crc32c implementation for ext4 metadata, and the
// hardware random source VMs offer, virtio-rng (QEMU, libvirt, GCE,
// OpenStack). Without one, and without RDRAND, the kernel's pool takes
// minutes to fill and the DHCP client waits for it. (The vTPMs clouds
// expose feed the pool through tpm_tis and tpm_crb, which Debian's kernel
// builds in; the old chipset RNGs, intel-rng and amd-rng, no VM has.)
var DefaultDrivers = []string{
	"virtio_pci", "virtio_blk", "virtio_net", "virtio_scsi", "virtio_console",
	"nvme", "ahci", "sd_mod", "ena", "gve",
	"hv_vmbus", "hv_storvsc", "hv_netvsc", "vmxnet3", "vmw_pvscsi",
	"e1000", "e1000e", "ext4", "vfat", "isofs", "sr_mod", "nls_cp437", "nls_iso8859_1", "nls_ascii",
	"i6300esb", "iTCO_wdt", "lpc_ich", "i2c_i801", "sp5100_tco",
	"button", "evdev", "efivarfs", "crc32c_generic",
	"virtio_rng",
}

// moduleName turns a module file name or a user-given name into the
// kernel's canonical form: "kernel/fs/nls/nls_iso8859-1.ko.xz" and
// "nls-iso8859-1" both become "nls_iso8859_1".
func moduleName(p string) string {
	base := path.Base(p)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// modIndex is what the module metadata files of one kernel say.
type modIndex struct {
	dir         string              // /lib/modules/<kver>
	deps        map[string][]string // module file (relative to dir) -> its dependencies
	byName      map[string]string   // canonical name -> module file
	builtin     map[string]bool     // canonical names of built-in modules
	depFile     []string            // modules.dep lines, in file order
	alias       []string            // modules.alias lines
	softdep     []string            // modules.softdep lines
	builtinFile []byte
}

// readLines returns the lines of dir/name; a missing optional file gives
// no lines.
func readLines(dir, name string, optional bool) ([]string, []byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		if optional && os.IsNotExist(err) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, b, sc.Err()
}

// loadModules reads modules.dep, modules.builtin, modules.alias and
// modules.softdep of the modules directory dir.
func loadModules(dir string) (*modIndex, error) {
	ix := &modIndex{dir: dir, deps: map[string][]string{}, byName: map[string]string{}, builtin: map[string]bool{}}
	var err error
	if ix.depFile, _, err = readLines(dir, "modules.dep", false); err != nil {
		return nil, fmt.Errorf("read modules.dep: %w", err)
	}
	for _, l := range ix.depFile {
		mod, rest, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("read modules.dep: malformed line %q", l)
		}
		ix.deps[mod] = strings.Fields(rest)
		ix.byName[moduleName(mod)] = mod
	}
	var builtin []string
	if builtin, ix.builtinFile, err = readLines(dir, "modules.builtin", false); err != nil {
		return nil, fmt.Errorf("read modules.builtin: %w", err)
	}
	for _, l := range builtin {
		if l = strings.TrimSpace(l); l != "" {
			ix.builtin[moduleName(l)] = true
		}
	}
	if ix.alias, _, err = readLines(dir, "modules.alias", false); err != nil {
		return nil, fmt.Errorf("read modules.alias: %w", err)
	}
	if ix.softdep, _, err = readLines(dir, "modules.softdep", true); err != nil {
		return nil, fmt.Errorf("read modules.softdep: %w", err)
	}
	return ix, nil
}

// softdeps returns the names the softdep lines of module name ask for.
func (ix *modIndex) softdeps(name string) []string {
	var out []string
	for _, l := range ix.softdep {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] != "softdep" || moduleName(f[1]) != name {
			continue
		}
		for _, w := range f[2:] {
			if w != "pre:" && w != "post:" {
				out = append(out, w)
			}
		}
	}
	return out
}

// lookup resolves a module name or alias (as softdep lines use them) to
// module files; an alias may match several modules.
func (ix *modIndex) lookup(name string) []string {
	if mod, ok := ix.byName[moduleName(name)]; ok {
		return []string{mod}
	}
	var out []string
	for _, l := range ix.alias {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "alias" {
			continue
		}
		if ok, _ := path.Match(f[1], name); !ok {
			continue
		}
		if mod, ok := ix.byName[moduleName(f[2])]; ok {
			out = append(out, mod)
		}
	}
	return out
}

// resolve returns the module files (relative to the modules directory,
// sorted) needed to provide the named drivers: each driver, everything
// modules.dep says it needs, and the modules its softdeps resolve to, with
// their dependencies. A built-in driver needs no file. Names that are
// neither a module nor built in are reported together.
func (ix *modIndex) resolve(names []string) ([]string, error) {
	seen := map[string]bool{}
	var missing []string
	var add func(mod string)
	add = func(mod string) {
		if seen[mod] {
			return
		}
		seen[mod] = true
		for _, d := range ix.deps[mod] {
			add(d)
		}
		for _, s := range ix.softdeps(moduleName(mod)) {
			for _, m := range ix.lookup(s) {
				add(m)
			}
		}
	}
	for _, n := range names {
		name := moduleName(n)
		if mod, ok := ix.byName[name]; ok {
			add(mod)
		} else if !ix.builtin[name] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("modules not found in %s: %s", ix.dir, strings.Join(missing, ", "))
	}
	mods := make([]string, 0, len(seen))
	for m := range seen {
		mods = append(mods, m)
	}
	sort.Strings(mods)
	return mods, nil
}

// metadata returns the modules.dep, modules.alias, modules.builtin and
// modules.softdep of an initramfs holding mods: the lines about modules it
// does not carry are dropped, the order of the rest is kept.
func (ix *modIndex) metadata(mods []string) map[string][]byte {
	have := map[string]bool{}
	for _, m := range mods {
		have[moduleName(m)] = true
	}
	keep := func(lines []string, owner func(f []string) string) []byte {
		var b bytes.Buffer
		for _, l := range lines {
			if name := owner(strings.Fields(l)); name != "" && have[moduleName(name)] {
				b.WriteString(l + "\n")
			}
		}
		return b.Bytes()
	}
	field := func(keyword string, i int) func([]string) string {
		return func(f []string) string {
			if len(f) <= i || (keyword != "" && f[0] != keyword) {
				return ""
			}
			return strings.TrimSuffix(f[i], ":")
		}
	}
	return map[string][]byte{
		"modules.dep":     keep(ix.depFile, field("", 0)),
		"modules.alias":   keep(ix.alias, field("alias", 2)),
		"modules.softdep": keep(ix.softdep, field("softdep", 1)),
		"modules.builtin": ix.builtinFile,
	}
}
