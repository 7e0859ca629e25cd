package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/etcdbox/etcdbox/bench/internal/figures"
)

// Run says where figures come from: when, at which commit, by which
// command, on what machine.
type Run struct {
	Date    string  `json:"date"` // RFC 3339, UTC
	Commit  string  `json:"commit"`
	Command string  `json:"command"`
	Machine Machine `json:"machine"`
}

// Machine is what the figures depend on most: the host's CPUs and
// whether QEMU ran with KVM or under software emulation (TCG).
type Machine struct {
	NProc int    `json:"nproc"`
	Accel string `json:"accel"`
}

// Section is one bench section's figures in bench.json, with the run
// that measured them: the latest run for the sections it ran, an earlier
// one for a section carried over from the bench.json it replaced.
type Section struct {
	Section string           `json:"section"`
	Run     Run              `json:"run"`
	Figures []figures.Figure `json:"figures"`
}

// Bench is bench.json: the latest run at the top, then every section.
type Bench struct {
	Run
	Sections []Section `json:"sections"`
}

// sectionOrder is hack/bench.sh's default order; other sections follow
// by name.
var sectionOrder = []string{"build", "boot", "cluster", "upgrade", "throughput", "verify", "backup"}

// merge returns old with the sections of this run, fresh, in place of
// old's sections of the same name: a partial run (BENCH_ONLY) replaces
// what it measured and keeps the rest, each kept section with its own
// run.
func merge(old Bench, run Run, fresh []figures.Section) Bench {
	out := Bench{Run: run}
	by := map[string]Section{}
	for _, s := range old.Sections {
		by[s.Section] = s
	}
	for _, s := range fresh {
		by[s.Section] = Section{Section: s.Section, Run: run, Figures: s.Figures}
	}
	for _, s := range by {
		out.Sections = append(out.Sections, s)
	}
	slices.SortFunc(out.Sections, func(a, b Section) int {
		return cmp.Or(cmp.Compare(rank(a.Section), rank(b.Section)), cmp.Compare(a.Section, b.Section))
	})
	return out
}

func rank(section string) int {
	if i := slices.Index(sectionOrder, section); i >= 0 {
		return i
	}
	return len(sectionOrder)
}

// readSections reads the files figures.Record wrote into dir.
func readSections(dir string) ([]figures.Section, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []figures.Section
	for _, p := range paths {
		var s figures.Section
		if err := readJSON(p, &s); err != nil {
			return nil, err
		}
		if s.Section == "" {
			return nil, fmt.Errorf("%s: no section name", p)
		}
		out = append(out, s)
	}
	return out, nil
}

// readBench reads bench.json; a missing file is an empty Bench.
func readBench(path string) (Bench, error) {
	var b Bench
	if err := readJSON(path, &b); err != nil && !os.IsNotExist(err) {
		return b, err
	}
	return b, nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeFile replaces path with data through a temporary file beside it.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// marshal is bench.json's text: indented, "<=" left as it is.
func marshal(b Bench) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(b)
	return buf.Bytes(), err
}
