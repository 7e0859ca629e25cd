package main

import (
	"debug/buildinfo"
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// counted are the sections whose bytes are attributed: code, read-only
// data and initialised data. .gopclntab (function names, line and stack
// tables, go:func.* funcdata) is left out: its symbols are a few
// containers, not per package. .bss and .noptrbss take no file space.
var counted = []string{".text", ".rodata", ".data", ".noptrdata"}

// attrGoRuntimeType is DW_AT_go_runtime_type: where the type descriptor
// of a DWARF type is, as an offset from runtime.types (Go 1.22 on) or
// an address (earlier).
const attrGoRuntimeType dwarf.Attr = 0x2904

// piece is a range of a counted section owned by one symbol or type.
type piece struct {
	name string
	addr uint64
	size uint64
	typ  bool // a type descriptor found through DWARF
}

// sizes is what one binary is made of.
type sizes struct {
	file      uint64            // sum of the sizes of the sections that take file space
	sections  map[string]uint64 // counted sections and the other allocated ones
	pieces    map[string][]piece
	clamped   uint64 // bytes of symbols past the next symbol or their section's end
	noDWARF   bool   // built with -w: type descriptors not attributed
	main      string // main module
	goVersion string
	mods      *modules
}

// readSizes reads the symbol table, the DWARF types and the build info
// of the Go binary at path.
func readSizes(path string) (*sizes, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if errors.Is(err, elf.ErrNoSymbols) {
		return nil, fmt.Errorf("%s has no symbol table: build it without -ldflags='-s -w'", path)
	} else if err != nil {
		return nil, err
	}
	s := &sizes{sections: map[string]uint64{}, pieces: map[string][]piece{},
		mods: newModules(bi), main: newModules(bi).main, goVersion: bi.GoVersion}
	want := map[elf.SectionIndex]string{}
	for i, sec := range f.Sections {
		if sec.Flags&elf.SHF_ALLOC == 0 || sec.Type == elf.SHT_NOBITS {
			continue
		}
		s.file += sec.Size
		s.sections[sec.Name] += sec.Size
		for _, c := range counted {
			if sec.Name == c {
				want[elf.SectionIndex(i)] = c
			}
		}
	}
	var typesAt uint64
	for _, sym := range syms {
		if sym.Name == "runtime.types" {
			typesAt = sym.Value
		}
		sec, ok := want[sym.Section]
		t := elf.ST_TYPE(sym.Info)
		if !ok || sym.Size == 0 || (t != elf.STT_FUNC && t != elf.STT_OBJECT) {
			continue
		}
		s.pieces[sec] = append(s.pieces[sec], piece{name: sym.Name, addr: sym.Value, size: sym.Size})
	}
	if d, err := f.DWARF(); err != nil {
		s.noDWARF = true
	} else if rodata := f.Section(".rodata"); rodata != nil && typesAt != 0 {
		types, err := dwarfTypes(d, typesAt, rodata.Addr+rodata.Size)
		if err != nil {
			return nil, err
		}
		s.pieces[".rodata"] = append(s.pieces[".rodata"], types...)
	}
	for _, sec := range counted {
		if h := f.Section(sec); h != nil {
			s.clamped += clamp(s.pieces[sec], h.Addr+h.Size)
		}
	}
	return s, nil
}

// dwarfTypes returns the type descriptors that DWARF names, each sized
// as the gap to the next one: a descriptor is followed by its uncommon
// part, method and field tables. The last one, whose end is not known,
// gets no bytes. Types without a descriptor (offset 0: shapes, the
// runtime's hchan<T> and map<K,V>) are skipped.
func dwarfTypes(d *dwarf.Data, typesAt, end uint64) ([]piece, error) {
	at := map[uint64]string{}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("DWARF: %w", err)
		}
		if e == nil {
			break
		}
		off, ok := e.Val(attrGoRuntimeType).(uint64)
		if !ok || off == 0 {
			continue
		}
		if off < typesAt {
			off += typesAt
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		if old, dup := at[off]; off < end && (!dup || strings.Contains(old, "<")) {
			at[off] = name
		}
	}
	types := make([]piece, 0, len(at))
	for a, n := range at {
		types = append(types, piece{name: n, addr: a, typ: true})
	}
	sort.Slice(types, func(i, j int) bool { return types[i].addr < types[j].addr })
	for i := 0; i+1 < len(types); i++ {
		types[i].size = types[i+1].addr - types[i].addr
	}
	return types, nil
}

// clamp sorts the pieces of one section by address and cuts each one
// at the start of the next and at end, so that no byte is counted twice;
// it returns the bytes cut. The Go linker's sizes are sound for nearly
// every symbol, but aliases at one address and a symbol whose size runs
// into its neighbour (a type DWARF sized past a symbol) would be.
func clamp(ps []piece, end uint64) (cut uint64) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].addr < ps[j].addr })
	for i := range ps {
		limit := end
		if i+1 < len(ps) {
			limit = ps[i+1].addr
		}
		if limit < ps[i].addr {
			limit = ps[i].addr
		}
		if ps[i].addr+ps[i].size > limit {
			cut += ps[i].addr + ps[i].size - limit
			ps[i].size = limit - ps[i].addr
		}
	}
	return cut
}
