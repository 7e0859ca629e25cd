package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// tinyFiles is a module of two packages, one with a type, a method and
// a generic function, for TestBinary.
var tinyFiles = map[string]string{
	"go.mod": "module example.com/tiny\n\ngo 1.22\n",
	"main.go": `package main

import (
	"fmt"
	"os"

	"example.com/tiny/shape"
)

func main() {
	s := shape.Square{Side: len(os.Args) + 2}
	fmt.Println(s.Area(), shape.Max([]int{3, len(os.Args)}))
}
`,
	"shape/shape.go": `package shape

// Square is a square.
type Square struct{ Side int }

// Area is its area.
//
//go:noinline
func (s Square) Area() int { return s.Side * s.Side }

// Max is the largest of xs.
//
//go:noinline
func Max[T int | float64](xs []T) T {
	m := xs[0]
	for _, x := range xs[1:] {
		m = max(m, x)
	}
	return m
}
`,
}

// TestBinary builds the tiny module for linux/amd64 with its symbol
// table and checks what run prints for it.
func TestBinary(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	for name, text := range tinyFiles {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "tiny")
	cmd := exec.Command(goTool, "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"-json", "-packages", "-n", "0", bin}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	var s summary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	mods := map[string]row{}
	for _, r := range s.Modules {
		mods[r.Name] = r
	}
	if s.MainModule != "example.com/tiny" {
		t.Errorf("main module %q", s.MainModule)
	}
	if std := mods[stdModule]; std.Code < 100_000 || std.Share < 0.5 {
		t.Errorf("std: %+v; want most of the binary", std)
	}
	if m := mods["example.com/tiny"]; m.Code == 0 || m.Bytes > 100_000 {
		t.Errorf("example.com/tiny: %+v; want main and shape's few bytes", m)
	}
	pkgs := map[string]bool{}
	for _, r := range s.Packages {
		pkgs[r.Name] = true
	}
	if !pkgs["main"] || !pkgs["example.com/tiny/shape"] || !pkgs["runtime"] || !pkgs["fmt"] {
		t.Errorf("packages %v: want main, example.com/tiny/shape, runtime, fmt", pkgs)
	}
	var sections uint64
	for _, sec := range counted {
		sections += s.Sections[sec]
	}
	if s.Attributed > sections || float64(s.Attributed) < 0.7*float64(sections) {
		t.Errorf("attributed %d of %d bytes in %v: want 70%% to 100%%", s.Attributed, sections, counted)
	}
	var sum uint64
	for _, r := range s.Modules {
		sum += r.Bytes
	}
	if sum != s.Attributed {
		t.Errorf("modules add up to %d, attributed %d", sum, s.Attributed)
	}

	out.Reset()
	if err := run(t.Context(), []string{"-n", "3", bin}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if text := out.String(); !strings.HasPrefix(text, "module ") || !strings.Contains(text, "\nstd ") || !strings.Contains(text, "not counted: .gopclntab") {
		t.Errorf("table:\n%s", text)
	}
}

// TestBeyond keeps the modules that grew against the base, by how much,
// with their shares of the growth; a module that shrank or stayed is not
// listed.
func TestBeyond(t *testing.T) {
	a := &summary{Binary: "a", FileBytes: 300, Modules: []row{
		{Name: "std", Bytes: 100, Code: 80, Data: 20},
		{Name: "shrank", Bytes: 50, Code: 50},
		{Name: "same", Bytes: 7, Code: 7},
		{Name: "new", Bytes: 30, Code: 10, Data: 20},
	}}
	base := &summary{Binary: "base", FileBytes: 200, Modules: []row{
		{Name: "std", Bytes: 90, Code: 75, Data: 15},
		{Name: "shrank", Bytes: 60, Code: 60},
		{Name: "same", Bytes: 7, Code: 7},
	}}
	got := beyond(a, base, 0)
	want := []row{
		{Name: "new", Bytes: 30, Code: 10, Data: 20, Share: 0.75},
		{Name: "std", Bytes: 10, Code: 5, Data: 5, Share: 0.25},
	}
	if len(got.Modules) != len(want) {
		t.Fatalf("rows %+v, want %+v", got.Modules, want)
	}
	for i := range want {
		if got.Modules[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got.Modules[i], want[i])
		}
	}
	if got.Attributed != 40 || got.Minus != "base" || got.MinusFileBytes != 200 {
		t.Errorf("attributed %d, minus %q (%d bytes); want 40, base (200)", got.Attributed, got.Minus, got.MinusFileBytes)
	}
	var out bytes.Buffer
	if err := printTable(&out, got); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "beyond base") || !strings.Contains(out.String(), "0.00 MB of code and data beyond base; file bytes of all: 0.00 MB against 0.00 MB") {
		t.Errorf("table:\n%s", out.String())
	}
}
