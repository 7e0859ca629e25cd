package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/etcdbox/etcdbox/bench/internal/figures"
)

// The README's generated table lives between these two lines; the
// text around them is written by hand.
const (
	beginMarker = "<!-- bench:figures begin -->"
	endMarker   = "<!-- bench:figures end -->"
)

// table renders b as the README's figures table: one row per figure,
// then one line per run that measured them, so that every row can be
// traced to a command and a commit.
func table(b Bench) string {
	var w strings.Builder
	w.WriteString("| section | figure | value | reference, same run | ratio | goal |\n")
	w.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	for _, s := range b.Sections {
		for _, f := range s.Figures {
			fmt.Fprintf(&w, "| %s | %s | %s | %s | %s | %s |\n",
				s.Section, cell(name(f)), cell(value(f)), cell(reference(f)), ratio(f), cell(f.Goal))
		}
	}
	w.WriteString("\n")
	var runs []Run
	sections := map[Run][]string{}
	for _, s := range b.Sections {
		if _, ok := sections[s.Run]; !ok {
			runs = append(runs, s.Run)
		}
		sections[s.Run] = append(sections[s.Run], s.Section)
	}
	for _, r := range runs {
		fmt.Fprintf(&w, "%s: measured by `%s` at commit `%s`, %s, %d CPUs, QEMU %s.\n",
			strings.Join(sections[r], ", "), r.Command, r.Commit, r.Date, r.Machine.NProc, r.Machine.Accel)
	}
	if len(runs) == 0 {
		w.WriteString("No figures recorded yet.\n")
	}
	w.WriteString("Generated from `bench.json` by `go run ./bench/figures readme bench.json README.md`; do not edit by hand.\n")
	return w.String()
}

func name(f figures.Figure) string {
	if f.Name != "" {
		return f.Name
	}
	return f.Key
}

// value is the figure with its unit, and the sample size of a median.
func value(f figures.Figure) string {
	s := quantity(f.Value, f.Unit)
	if f.N > 1 {
		s += fmt.Sprintf(" (median of %d)", f.N)
	}
	return s
}

func reference(f figures.Figure) string {
	if f.Reference == "" {
		return "-"
	}
	return f.Reference + ": " + quantity(f.RefValue, f.Unit)
}

func ratio(f figures.Figure) string {
	if f.Reference == "" || f.RefValue == 0 {
		return "-"
	}
	return fmt.Sprintf("**%.2fx**", f.Ratio)
}

// quantity prints v with three significant digits or all its integer
// digits, and its unit: "235 s", "3.35 s", "0.159 s", "1.20x".
func quantity(v float64, unit string) string {
	var s string
	switch a := math.Abs(v); {
	case unit == "x":
		return fmt.Sprintf("%.2fx", v)
	case a >= 100 || a == math.Trunc(a) && a != 0:
		s = fmt.Sprintf("%.0f", v)
	case a >= 10:
		s = fmt.Sprintf("%.1f", v)
	case a >= 1:
		s = fmt.Sprintf("%.2f", v)
	default:
		s = fmt.Sprintf("%.3g", v)
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}

// cell keeps a value inside its table cell.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// replaceTable returns readme with the text between the markers
// replaced by tbl; the marker lines stay.
func replaceTable(readme []byte, tbl string) ([]byte, error) {
	begin := bytes.Index(readme, []byte(beginMarker))
	end := bytes.Index(readme, []byte(endMarker))
	switch {
	case begin < 0 || end < 0:
		return nil, fmt.Errorf("want the lines %s and %s", beginMarker, endMarker)
	case end < begin:
		return nil, errors.New(endMarker + " comes before " + beginMarker)
	case bytes.Count(readme, []byte(beginMarker)) > 1 || bytes.Count(readme, []byte(endMarker)) > 1:
		return nil, errors.New("more than one pair of markers")
	}
	head := readme[:begin+len(beginMarker)]
	var out bytes.Buffer
	out.Write(head)
	out.WriteString("\n\n")
	out.WriteString(tbl)
	out.WriteString("\n")
	out.Write(readme[end:])
	return out.Bytes(), nil
}
