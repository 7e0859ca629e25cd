// Package kmod loads Linux kernel modules the way modprobe does, without
// modprobe: it reads the text indexes depmod writes (modules.dep,
// modules.alias, modules.builtin and, when present, modules.softdep) and
// inserts modules with finit_module(2).
//
// The init uses it for coldplug: every device sysfs lists that
// exposes a modalias gets the modules whose alias patterns match it, each
// after its dependencies.
//
//	l := &kmod.Loader{Dir: "/lib/modules/" + release, Logf: log.Printf}
//	loaded, err := l.Coldplug("/sys") // err lists the modules that failed
//	_, err = l.Load("ext4")           // by name or by alias
//
// Semantics follow kmod (libkmod/modprobe) where it matters:
//
//   - Module names treat '-' and '_' as the same character, so
//     "crc32c-intel" and "crc32c_intel" are one module.
//   - modules.dep lists the whole dependency closure of a module, ordered so
//     that the LAST entry must be inserted FIRST (modprobe walks the list
//     backwards; `modprobe --show-depends ext4` prints jbd2, mbcache, crc16,
//     ext4 for "ext4.ko: crc16.ko mbcache.ko jbd2.ko"). The loader walks it
//     backwards too, and recurses into each dependency's own line, so a
//     hand-written modules.dep in any order still loads correctly.
//   - Alias patterns are fnmatch(3) globs (*, ?, [...]), and both the
//     pattern and the looked-up string have '-' replaced by '_' outside
//     brackets, as libkmod's alias_normalize does for modules.alias.bin.
//   - A modalias that matches several modules loads all of them.
//   - Soft dependencies ("softdep ext4 pre: crypto-crc32c") are loaded
//     before (pre) or after (post) the module, but their failures are only
//     logged: crc32c-intel fails with ENODEV on a CPU without SSE4.2 and
//     must not stop ext4 from loading.
//   - Builtin modules are present already: loading one is a no-op.
package kmod

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Index is the parsed content of a modules directory
// (/lib/modules/<release>). It is read-only after ReadIndex returns.
type Index struct {
	dir      string
	modules  map[string]*module // by normalised name
	builtin  map[string]bool
	aliases  []alias
	byKey    map[string][]int // literal alias key (text before ':') -> aliases
	anyKey   []int            // aliases whose key holds glob characters
	softdeps map[string]softdep
}

type module struct {
	name string
	path string   // as written in modules.dep, relative to dir unless absolute
	deps []string // normalised names, in modules.dep order
}

type alias struct {
	pattern string // normalised
	module  string // normalised
}

type softdep struct {
	pre, post []string // module names or aliases, as written
}

// ReadIndex parses modules.dep, modules.alias and modules.builtin in dir;
// modules.softdep is optional. Errors name the file and line.
func ReadIndex(dir string) (*Index, error) {
	ix := &Index{
		dir:      dir,
		modules:  map[string]*module{},
		builtin:  map[string]bool{},
		byKey:    map[string][]int{},
		softdeps: map[string]softdep{},
	}
	for _, f := range []struct {
		name     string
		optional bool
		parse    func(file string, n int, line string) error
	}{
		{"modules.dep", false, ix.parseDep},
		{"modules.alias", false, ix.parseAlias},
		{"modules.builtin", false, ix.parseBuiltin},
		{"modules.softdep", true, ix.parseSoftdep},
	} {
		err := eachLine(filepath.Join(dir, f.name), f.parse)
		if f.optional && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	return ix, nil
}

// eachLine calls fn for every non-blank, non-comment line of file.
func eachLine(file string, fn func(file string, n int, line string) error) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadString('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("read %s: %w", file, err)
		}
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			if perr := fn(file, n, l); perr != nil {
				return perr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// parseDep reads "kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko ...".
func (ix *Index) parseDep(file string, n int, line string) error {
	head, rest, ok := strings.Cut(line, ":")
	if !ok {
		return fmt.Errorf("%s:%d: no ':' in %q", file, n, line)
	}
	head = strings.TrimSpace(head)
	m := &module{name: NameOf(head), path: head}
	for _, d := range strings.Fields(rest) {
		m.deps = append(m.deps, NameOf(d))
	}
	// depmod writes one line per name; should a name repeat (a module in
	// updates/ and in kernel/), the first line wins as in depmod's search
	// order.
	if _, dup := ix.modules[m.name]; !dup {
		ix.modules[m.name] = m
	}
	return nil
}

// parseAlias reads "alias <pattern> <module>".
func (ix *Index) parseAlias(file string, n int, line string) error {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "alias" {
		return fmt.Errorf("%s:%d: want \"alias PATTERN MODULE\", got %q", file, n, line)
	}
	a := alias{pattern: normalizeAlias(f[1]), module: Normalize(f[2])}
	i := len(ix.aliases)
	ix.aliases = append(ix.aliases, a)
	if k := aliasKey(a.pattern); strings.ContainsAny(k, `*?[\`) {
		ix.anyKey = append(ix.anyKey, i)
	} else {
		ix.byKey[k] = append(ix.byKey[k], i)
	}
	return nil
}

// parseBuiltin reads one module path per line.
func (ix *Index) parseBuiltin(_ string, _ int, line string) error {
	ix.builtin[NameOf(line)] = true
	return nil
}

// parseSoftdep reads "softdep MODULE pre: A B post: C". As in libkmod,
// words before the first "pre:" or "post:" are ignored (some modules
// declare MODULE_SOFTDEP("gcm") without a mode, which kmod ignores too).
func (ix *Index) parseSoftdep(file string, n int, line string) error {
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "softdep" {
		return fmt.Errorf("%s:%d: want \"softdep MODULE pre: ... post: ...\", got %q", file, n, line)
	}
	name := Normalize(f[1])
	sd := ix.softdeps[name]
	var mode *[]string
	for _, w := range f[2:] {
		switch w {
		case "pre:":
			mode = &sd.pre
		case "post:":
			mode = &sd.post
		default:
			if mode != nil {
				*mode = append(*mode, w)
			}
		}
	}
	ix.softdeps[name] = sd
	return nil
}

// Normalize returns the canonical spelling of a module name: '-' and '_'
// are the same character to the kernel, and '_' is what it reports.
func Normalize(name string) string { return strings.ReplaceAll(name, "-", "_") }

// NameOf returns the module name of a module file path:
// "kernel/arch/x86/crypto/crc32c-intel.ko.xz" -> "crc32c_intel".
func NameOf(file string) string {
	b := path.Base(filepath.ToSlash(file))
	for _, ext := range []string{".xz", ".zst", ".gz"} {
		b = strings.TrimSuffix(b, ext)
	}
	return Normalize(strings.TrimSuffix(b, ".ko"))
}

// normalizeAlias replaces '-' by '_' outside bracket expressions, like
// libkmod's alias_normalize (so "[a-c]" keeps its range).
func normalizeAlias(s string) string {
	b := []byte(s)
	inBracket := false
	for i, c := range b {
		switch {
		case c == '[':
			inBracket = true
		case c == ']':
			inBracket = false
		case c == '-' && !inBracket:
			b[i] = '_'
		}
	}
	return string(b)
}

// aliasKey is the text before the first ':' ("pci", "virtio", "acpi"), or
// the whole string when it has none. Aliases with a literal key can only
// match strings with the same key, which keeps matching a modalias against
// ~26000 aliases cheap.
func aliasKey(s string) string {
	k, _, _ := strings.Cut(s, ":")
	return k
}

// Has reports whether name is a loadable module (in modules.dep) or
// builtin.
func (ix *Index) Has(name string) bool {
	n := Normalize(name)
	return ix.modules[n] != nil || ix.builtin[n]
}

// Builtin reports whether name is compiled into the kernel.
func (ix *Index) Builtin(name string) bool { return ix.builtin[Normalize(name)] }

// Path returns the absolute path of a loadable module's file, or "" when
// name is not in modules.dep.
func (ix *Index) Path(name string) string {
	m := ix.modules[Normalize(name)]
	if m == nil {
		return ""
	}
	if filepath.IsAbs(m.path) {
		return m.path
	}
	return filepath.Join(ix.dir, m.path)
}

// Match returns the modules whose alias patterns match modalias, in
// modules.alias order, without duplicates. The modules may be missing
// from modules.dep (a filtered initramfs); Load reports those.
func (ix *Index) Match(modalias string) []string {
	s := strings.ReplaceAll(modalias, "-", "_")
	var out []string
	seen := map[string]bool{}
	try := func(i int) {
		a := ix.aliases[i]
		if !seen[a.module] && fnmatch(a.pattern, s) {
			seen[a.module] = true
			out = append(out, a.module)
		}
	}
	// Merge the two candidate lists in file order so results do not
	// depend on which bucket a pattern landed in.
	lit, glob := ix.byKey[aliasKey(s)], ix.anyKey
	for len(lit) > 0 || len(glob) > 0 {
		if len(glob) == 0 || (len(lit) > 0 && lit[0] < glob[0]) {
			try(lit[0])
			lit = lit[1:]
		} else {
			try(glob[0])
			glob = glob[1:]
		}
	}
	return out
}

// Resolve turns what a user or a softdep names into module names: a module
// (loadable or builtin) names itself; anything else is looked up as an
// alias ("crypto-crc32c" -> crc32c_intel, crc32c_generic).
func (ix *Index) Resolve(name string) []string {
	if ix.Has(name) {
		return []string{Normalize(name)}
	}
	return ix.Match(name)
}

// Order returns the modules to insert, in order, so that name can be
// loaded: soft pre-dependencies, hard dependencies (the last one listed in
// modules.dep first), the module, then soft post-dependencies. Builtin
// modules are left out. The result matches `modprobe --show-depends`.
// Soft dependencies that resolve to nothing in this index are dropped;
// a missing hard dependency or module is an error.
func (ix *Index) Order(name string) ([]string, error) {
	var out []string
	err := ix.walk(Normalize(name), map[string]error{}, true,
		func(n, _ string, _ bool) error { out = append(out, n); return nil },
		func(string, error) {})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// walk visits n depth first and calls insert for every module to load, in
// load order, each at most once per seen map. hard says whether n is
// required: a missing or failing required module fails its dependants,
// while soft dependencies only get reported through softErr.
func (ix *Index) walk(n string, seen map[string]error, hard bool,
	insert func(name, path string, hard bool) error, softErr func(name string, err error)) (err error) {
	if prev, ok := seen[n]; ok {
		// Loaded, failed before (reported then), or in progress (a
		// softdep cycle): only a required module passes a failure on.
		if hard {
			return prev
		}
		return nil
	}
	seen[n] = nil
	defer func() {
		seen[n] = err
		if err != nil && !hard {
			softErr(n, err)
			err = nil
		}
	}()
	if ix.builtin[n] {
		return nil
	}
	m := ix.modules[n]
	if m == nil {
		return fmt.Errorf("module %s: not in %s", n, filepath.Join(ix.dir, "modules.dep"))
	}
	soft := func(names []string) {
		for _, p := range names {
			rs := ix.Resolve(p)
			if len(rs) == 0 {
				softErr(p, fmt.Errorf("soft dependency %s of %s: no such module or alias", p, n))
			}
			for _, r := range rs {
				_ = ix.walk(r, seen, false, insert, softErr)
			}
		}
	}
	sd := ix.softdeps[n]
	soft(sd.pre)
	for i := len(m.deps) - 1; i >= 0; i-- {
		if err := ix.walk(m.deps[i], seen, true, insert, softErr); err != nil {
			return fmt.Errorf("module %s: dependency: %w", n, err)
		}
	}
	if err := insert(n, ix.Path(n), hard); err != nil {
		return err
	}
	soft(sd.post)
	return nil
}
