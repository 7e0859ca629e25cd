// Command binsize prints what a Go binary is made of, module by module
// (issue 17, "A smaller image"): the bytes of code, read-only data and
// initialised data that each module of the binary's build info owns, the
// standard library as "std", the top N by size with their share.
//
// The binary must keep its symbol table (no -ldflags='-s -w'). Code and
// data are attributed through the ELF symbol table (sizes cut where a
// symbol would run into the next); type descriptors, which the linker
// leaves out of the symbol table, through DWARF when the binary has it.
// What is not attributed is printed below the table: in .rodata the type
// names and strings (shared, deduplicated), in the other sections
// padding; and .gopclntab (function names and line and stack tables,
// roughly in proportion to the code) is not counted at all.
//
//	GOOS=linux GOARCH=amd64 CGO_ENABLED=0 go build -trimpath -o /tmp/init ./init
//	go run ./bench/binsize -n 15 /tmp/init
//
// With -minus BASE it prints instead what the binary has beyond another
// one, module by module: the modules that grew, by how much. /init links
// etcd (init/runetcd.go), so `-minus etcd` is what the init itself costs.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/etcdbox/etcdbox/bench/internal/benchmain"
)

func main() { benchmain.Main("binsize", run) }

// row is one module or package of the table.
type row struct {
	Name  string  `json:"name"`
	Bytes uint64  `json:"bytes"`
	Code  uint64  `json:"code_bytes"`  // .text
	Data  uint64  `json:"data_bytes"`  // .rodata, .data, .noptrdata (types included)
	Types uint64  `json:"types_bytes"` // type descriptors, through DWARF
	Share float64 `json:"share"`       // of the attributed total
}

// summary is the whole report, also the -json output.
type summary struct {
	Binary       string            `json:"binary"`
	GoVersion    string            `json:"go_version"`
	MainModule   string            `json:"main_module"`
	FileBytes    uint64            `json:"file_bytes"` // allocated sections: what the image carries stripped
	Sections     map[string]uint64 `json:"sections"`
	Attributed   uint64            `json:"attributed_bytes"`
	Unattributed map[string]uint64 `json:"unattributed_bytes"` // of the counted sections
	Clamped      uint64            `json:"clamped_bytes"`
	NoDWARF      bool              `json:"no_dwarf,omitempty"`
	Modules      []row             `json:"modules"`
	Packages     []row             `json:"packages,omitempty"`
	// Minus is -minus's binary; Modules and Packages are then what grew
	// beyond it, and Attributed their sum.
	Minus          string `json:"minus,omitempty"`
	MinusFileBytes uint64 `json:"minus_file_bytes,omitempty"`
}

// run parses args, reads the binary and prints its table to stdout.
func run(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("binsize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 15, "rows to print; 0 for all")
	pkgs := fs.Bool("packages", false, "also print the top packages")
	asJSON := fs.Bool("json", false, "print JSON")
	minus := fs.String("minus", "", "print what the binary has beyond this one (also built without -s -w)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: binsize [-n N] [-packages] [-json] [-minus BASE] <go binary built without -s -w>")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("one binary expected")
	}
	s, err := readSizes(fs.Arg(0))
	if err != nil {
		return err
	}
	sum := summarise(fs.Arg(0), s, *n, *pkgs)
	if *minus != "" {
		bs, err := readSizes(*minus)
		if err != nil {
			return err
		}
		sum = beyond(summarise(fs.Arg(0), s, 0, *pkgs), summarise(*minus, bs, 0, *pkgs), *n)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}
	return printTable(stdout, sum)
}

// summarise attributes every piece to its package and module and keeps
// the top n of each (all for n <= 0; packages only when pkgs).
func summarise(path string, s *sizes, n int, pkgs bool) *summary {
	sum := &summary{Binary: path, GoVersion: s.goVersion, MainModule: s.main, FileBytes: s.file,
		Sections: s.sections, Unattributed: map[string]uint64{}, Clamped: s.clamped, NoDWARF: s.noDWARF}
	byMod, byPkg := map[string]*row{}, map[string]*row{}
	add := func(m map[string]*row, key string, p piece, code bool) {
		r := m[key]
		if r == nil {
			r = &row{Name: key}
			m[key] = r
		}
		r.Bytes += p.size
		switch {
		case code:
			r.Code += p.size
		case p.typ:
			r.Types += p.size
			r.Data += p.size
		default:
			r.Data += p.size
		}
	}
	for _, sec := range counted {
		var got uint64
		for _, p := range s.pieces[sec] {
			pkg, mod := s.mods.lookup(p.name)
			add(byMod, mod, p, sec == ".text")
			add(byPkg, pkg, p, sec == ".text")
			got += p.size
		}
		sum.Attributed += got
		sum.Unattributed[sec] = s.sections[sec] - got
	}
	sum.Modules = top(byMod, sum.Attributed, n)
	if pkgs {
		sum.Packages = top(byPkg, sum.Attributed, n)
	}
	return sum
}

// beyond returns a's summary with its rows replaced by what each module
// (and package) has beyond base: the rows that grew, by how much, the top
// n, with their shares of the growth. a and base hold every row.
func beyond(a, base *summary, n int) *summary {
	diff := func(rows, baseRows []row) (map[string]*row, uint64) {
		was := map[string]row{}
		for _, r := range baseRows {
			was[r.Name] = r
		}
		out, total := map[string]*row{}, uint64(0)
		for _, r := range rows {
			b := was[r.Name]
			if r.Bytes <= b.Bytes {
				continue
			}
			d := &row{Name: r.Name, Bytes: r.Bytes - b.Bytes,
				Code: r.Code - min(r.Code, b.Code), Data: r.Data - min(r.Data, b.Data), Types: r.Types - min(r.Types, b.Types)}
			out[r.Name] = d
			total += d.Bytes
		}
		return out, total
	}
	s := *a
	s.Minus, s.MinusFileBytes = base.Binary, base.FileBytes
	mods, total := diff(a.Modules, base.Modules)
	s.Attributed = total
	s.Modules = top(mods, total, n)
	if a.Packages != nil {
		pkgs, ptotal := diff(a.Packages, base.Packages)
		s.Packages = top(pkgs, ptotal, n)
	}
	return &s
}

// top returns the n largest rows of m, by bytes then name, with their
// share of total.
func top(m map[string]*row, total uint64, n int) []row {
	rows := make([]row, 0, len(m))
	for _, r := range m {
		if total > 0 {
			r.Share = float64(r.Bytes) / float64(total)
		}
		rows = append(rows, *r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Bytes != rows[j].Bytes {
			return rows[i].Bytes > rows[j].Bytes
		}
		return rows[i].Name < rows[j].Name
	})
	if n > 0 && len(rows) > n {
		rows = rows[:n]
	}
	return rows
}

// mb is bytes in MB (10^6), two decimals.
func mb(b uint64) string { return fmt.Sprintf("%.2f", float64(b)/1e6) }

// printTable prints the modules (and packages) and what was not
// attributed.
func printTable(w io.Writer, s *summary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	table := func(title string, rows []row) {
		fmt.Fprintf(tw, "%s\t%6s\t%6s\t%7s\t%7s\n", title, "MB", "share", "code MB", "data MB")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%6s\t%5.1f%%\t%7s\t%7s\n", r.Name, mb(r.Bytes), 100*r.Share, mb(r.Code), mb(r.Data))
		}
		fmt.Fprintf(tw, "total attributed\t%6s\t%5.1f%%\t\t\n", mb(s.Attributed), 100.0)
	}
	if s.Minus != "" {
		fmt.Fprintf(tw, "beyond %s\n", s.Minus)
	}
	table("module", s.Modules)
	if len(s.Packages) > 0 {
		fmt.Fprintln(tw)
		table("package", s.Packages)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s.Minus != "" {
		_, err := fmt.Fprintf(w, "%s MB of code and data beyond %s; file bytes of all: %s MB against %s MB\n",
			mb(s.Attributed), s.Minus, mb(s.FileBytes), mb(s.MinusFileBytes))
		return err
	}
	var sections, unattr uint64
	for _, sec := range counted {
		sections += s.Sections[sec]
		unattr += s.Unattributed[sec]
	}
	fmt.Fprintf(w, "attributed %s MB of the %s MB of .text, .rodata, .data and .noptrdata (%.1f%%); %s MB cut from symbols that overran\n",
		mb(s.Attributed), mb(sections), 100*float64(s.Attributed)/float64(max(sections, 1)), mb(s.Clamped))
	fmt.Fprintf(w, "not attributed: .rodata %s MB (type names, strings, other unnamed data), .text %s MB, .data %s MB, .noptrdata %s MB (padding, unnamed)\n",
		mb(s.Unattributed[".rodata"]), mb(s.Unattributed[".text"]), mb(s.Unattributed[".data"]), mb(s.Unattributed[".noptrdata"]))
	if s.NoDWARF {
		fmt.Fprintln(w, "no DWARF (built with -w): type descriptors are in .rodata's unattributed bytes")
	}
	other := s.FileBytes - sections - s.Sections[".gopclntab"]
	_, err := fmt.Fprintf(w, "not counted: .gopclntab %s MB (function names, line and stack tables: about %.2f bytes per byte of code), other sections %s MB; file bytes of all: %s MB\n",
		mb(s.Sections[".gopclntab"]), float64(s.Sections[".gopclntab"])/float64(max(s.Sections[".text"], 1)), mb(other), mb(s.FileBytes))
	return err
}
