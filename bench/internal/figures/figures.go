// Package figures is the machine-readable side of `make bench`: each
// bench program records its figures, each with the reference it was
// measured against in the same run and their ratio, and hack/bench.sh
// gathers them into bench.json, from which the README's figures table is
// generated. Nothing here asserts a figure.
package figures

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
)

// Figure is one measured value. Ratio is Value/RefValue when the figure
// has a reference, 0 otherwise.
type Figure struct {
	// Key is stable and unique in its section ("roll.total"); Name is for
	// people ("roll of 3 nodes, total").
	Key  string `json:"key"`
	Name string `json:"name"`
	// Value in Unit ("s", "ms", "MiB", "ops/s", "x").
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Reference names what Value is compared with, measured in the same
	// run ("one plain reboot"), and RefValue is its value in Unit.
	Reference string  `json:"reference,omitempty"`
	RefValue  float64 `json:"refValue,omitempty"`
	Ratio     float64 `json:"ratio,omitempty"`
	// Goal is issue 17's goal for the figure as text ("<= 3.5x"), if any.
	Goal string `json:"goal,omitempty"`
	// N is the sample size behind Value (medians), 0 when unknown.
	N int `json:"n,omitempty"`
}

// Ref returns f compared with the reference ref of value v: it sets
// Reference, RefValue and Ratio.
func (f Figure) Ref(ref string, v float64) Figure {
	f.Reference, f.RefValue = ref, v
	if v != 0 {
		f.Ratio = f.Value / v
	}
	return f
}

// Section is one bench section's figures, as one file of DirEnv.
type Section struct {
	Section string   `json:"section"`
	Figures []Figure `json:"figures"`
}

// DirEnv names the directory where Record writes each section's file;
// hack/bench.sh sets it and merges the files into bench.json.
const DirEnv = "BENCH_JSON_DIR"

var (
	mu      sync.Mutex
	keyRule = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
)

// Record adds figs to section's file in $BENCH_JSON_DIR
// (<section>.json), replacing figures of the same key. Without the
// variable it does nothing: the printed figures are the bench's output.
func Record(section string, figs ...Figure) error {
	dir := os.Getenv(DirEnv)
	if dir == "" {
		return nil
	}
	if !keyRule.MatchString(section) {
		return fmt.Errorf("figures: section %q: want lower-case letters, digits, '.', '_' or '-'", section)
	}
	for _, f := range figs {
		if !keyRule.MatchString(f.Key) {
			return fmt.Errorf("figures: %s: key %q: want lower-case letters, digits, '.', '_' or '-'", section, f.Key)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	path := filepath.Join(dir, section+".json")
	s := Section{Section: section}
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &s); err != nil {
			return fmt.Errorf("figures: %s: %w", path, err)
		}
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("figures: %w", err)
	}
	for _, f := range figs {
		replaced := false
		for i := range s.Figures {
			if s.Figures[i].Key == f.Key {
				s.Figures[i], replaced = f, true
			}
		}
		if !replaced {
			s.Figures = append(s.Figures, f)
		}
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("figures: %w", err)
	}
	return os.Rename(tmp, path)
}

// Read reads section's file in dir, as Record wrote it.
func Read(dir, section string) (Section, error) {
	var s Section
	data, err := os.ReadFile(filepath.Join(dir, section+".json"))
	if err != nil {
		return s, fmt.Errorf("figures: %w", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("figures: %s: %w", section, err)
	}
	return s, nil
}

// ByKey returns the section's figures by key.
func (s Section) ByKey() map[string]Figure {
	m := map[string]Figure{}
	for _, f := range s.Figures {
		m[f.Key] = f
	}
	return m
}

// Ratios returns each figure's ratio by key (0 for a figure without a
// reference).
func (s Section) Ratios() map[string]float64 {
	m := map[string]float64{}
	for _, f := range s.Figures {
		m[f.Key] = f.Ratio
	}
	return m
}
