package main

import (
	"net/url"
	"runtime/debug"
	"strings"
)

// Pseudo-modules for bytes that belong to no Go package.
const (
	stdModule    = "std"
	linkerModule = "(linker)"     // go:buildid, $f64.3ff0000000000000 and the like
	unknownMod   = "(unknown)"    // a package in no module of the build info
	noPackage    = "(no package)" // unnamed types of builtins: map[int]bool
)

// namePrefixes are the linker's prefixes in front of the name of the
// type or package a symbol belongs to, longest first where one is the
// prefix of another: "type:.eq.[8]internal/cpu.option" is the equality
// function of an array of internal/cpu.option, "go:itab.*os.File,io.Writer"
// the itab of *os.File for io.Writer (it goes with the concrete type).
var namePrefixes = []string{
	"type:.eq.", "type:.hash.", "type:.namedata.", "type:.importpath.",
	"type:.gcmask.", "type:.gcprog.", "type:", "go:itab.", "go:link.", "noalg.",
	"map.group", "map.iter", // a map's slot group and iterator: the key's and element's
}

// symbolPackage returns the import path of the package a linker symbol
// or a DWARF type name belongs to, as the linker spells it (dots in the
// last path element escaped as %2e), or "" when the name has none (a
// linker symbol such as go:buildid, a constant such as $f64.3ff0000000000000,
// an unnamed type such as map[int]bool).
//
// It strips the prefixes above, then takes the first qualified name in
// what is left: the package of "pkg.(*T).M", "pkg.T[other.U].M",
// "pkg.F.func1", "*pkg.T", "[]pkg.T", "func(pkg.T) error" or
// "map[string]pkg.T" is pkg, the outer type winning over its generic
// arguments. A path runs to the first dot after its first slash: the
// linker escapes dots in the last element, only the first has them
// otherwise (a dotted middle element, rare, would be cut short; the
// standard library's vendor/golang.org/x/... is seen to), and
// "pkg.T.other/pkg.m" (a method of an embedded interface of another
// package) is pkg's. Names of assembly functions local to their file
// (indexbytebody, from internal/bytealg) have no package.
func symbolPackage(name string) string {
	for again := true; again; {
		again = false
		for _, p := range namePrefixes {
			if strings.HasPrefix(name, p) {
				name, again = name[len(p):], true
				break
			}
		}
	}
	if strings.HasPrefix(name, "go:") || strings.HasPrefix(name, "go.shape.") || strings.HasPrefix(name, "$") {
		return ""
	}
	for _, tok := range strings.FieldsFunc(name, isDelim) {
		tok = strings.TrimLeft(tok, ".") // ...T of a variadic func type
		i := strings.IndexByte(tok, '/') + 1
		if strings.HasPrefix(tok, "vendor/") { // the standard library's golang.org/x
			i += strings.IndexByte(tok[i:], '/') + 1
		}
		j := strings.IndexByte(tok[i:], '.')
		if j <= 0 {
			continue // a keyword, a builtin type, an array length
		}
		if p := tok[:i+j]; p != "go" { // go.shape.int in an instantiation
			return p
		}
	}
	return ""
}

// isDelim reports whether r ends a token of a symbol or type name: path
// and identifier characters (letters, digits, "_./-~%" and the middle
// dot of compiler-generated names) are what is left.
func isDelim(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r > 0x7f:
		return false
	}
	return !strings.ContainsRune("_./-~%", r)
}

// modules maps package paths to the modules of one binary.
type modules struct {
	main  string
	paths []string // main module and dependencies
}

// newModules returns the modules of a binary's build info.
func newModules(bi *debug.BuildInfo) *modules {
	m := &modules{main: bi.Main.Path}
	if m.main == "" {
		m.main = bi.Path // `go build x.go`: no module, "command-line-arguments"
	}
	m.paths = append(m.paths, m.main)
	for _, d := range bi.Deps {
		m.paths = append(m.paths, d.Path)
	}
	return m
}

// lookup returns the package (unescaped) and the module of a symbol
// or type name: "std" for a package whose first path element has no dot
// (the standard library, vendor/golang.org/x/... in it included), the
// main module for package main, the longest module path that is the
// package path or a prefix of it at a slash, and otherwise (unknown);
// (linker) and (no package) for names without a package.
// DWARF type names do not escape dots, so "gopkg.in/inf.v0.Dec" parses
// as package gopkg.in/inf: a module the whole name starts with (then a
// dot) and that starts with the package is taken for it.
func (m *modules) lookup(name string) (pkg, module string) {
	esc := symbolPackage(name)
	if esc == "" {
		if strings.HasPrefix(name, "go:") || strings.HasPrefix(name, "$") || name == "type:*" {
			return linkerModule, linkerModule
		}
		return noPackage, noPackage
	}
	pkg = esc
	if u, err := url.PathUnescape(esc); err == nil {
		pkg = u
	}
	if pkg == "main" {
		return pkg, m.main
	}
	if first, _, _ := strings.Cut(pkg, "/"); !strings.Contains(first, ".") {
		return pkg, stdModule
	}
	best := ""
	for _, p := range m.paths {
		if len(p) > len(best) && (pkg == p || strings.HasPrefix(pkg, p+"/")) {
			best = p
		}
	}
	if best != "" {
		return pkg, best
	}
	rest := strings.TrimLeft(name, "*[]0123456789")
	for _, p := range m.paths {
		if strings.HasPrefix(p, pkg) && strings.HasPrefix(rest, p+".") {
			return p, p
		}
	}
	return pkg, unknownMod
}
