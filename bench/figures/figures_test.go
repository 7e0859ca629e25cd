package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/bench/internal/figures"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the output")

// golden compares got with testdata/name, or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "%s (go test ./bench/figures -update rewrites it)", path)
}

var (
	earlier = Run{Date: "2026-01-01T00:00:00Z", Commit: "aaaaaaa", Command: "hack/bench.sh", Machine: Machine{NProc: 2, Accel: "tcg"}}
	latest  = Run{Date: "2026-02-01T00:00:00Z", Commit: "bbbbbbb-dirty", Command: `BENCH_ONLY="build verify" hack/bench.sh`, Machine: Machine{NProc: 2, Accel: "tcg"}}
)

// fixture is a bench.json of an earlier full run: build, upgrade, a
// section unknown to sectionOrder, backup.
func fixture() Bench {
	roll := figures.Figure{Key: "roll.total", Name: "roll of 3 nodes, total", Value: 235.3, Unit: "s", Goal: "<= 3.5x"}.Ref("one plain reboot", 33.6)
	return Bench{Run: earlier, Sections: []Section{
		{Section: "build", Run: earlier, Figures: []figures.Figure{{Key: "build.time", Name: "image build", Value: 3.35, Unit: "s", N: 5}}},
		{Section: "upgrade", Run: earlier, Figures: []figures.Figure{roll, {Key: "gap", Name: "longest write | gap", Value: 0.0123, Unit: "s"}}},
		{Section: "zz", Run: earlier, Figures: []figures.Figure{{Key: "k", Value: 1}}},
		{Section: "backup", Run: earlier, Figures: []figures.Figure{{Key: "p99", Name: "p99", Value: 9.9, Unit: "x"}}},
	}}
}

func TestMergeReplacesTheSectionsOfThisRun(t *testing.T) {
	fresh := []figures.Section{
		{Section: "verify", Figures: []figures.Figure{{Key: "verify.share", Name: "verification / staging", Value: 0.26, Unit: "x"}}},
		{Section: "build", Figures: []figures.Figure{{Key: "build.time", Name: "image build", Value: 2.1, Unit: "s", N: 5}}},
	}
	got := merge(fixture(), latest, fresh)
	var order []string
	for _, s := range got.Sections {
		order = append(order, s.Section)
	}
	assert.Equal(t, []string{"build", "upgrade", "verify", "backup", "zz"}, order)
	assert.Equal(t, latest, got.Run)
	assert.Equal(t, latest, got.Sections[0].Run, "build was measured by this run")
	assert.Equal(t, 2.1, got.Sections[0].Figures[0].Value)
	assert.Equal(t, earlier, got.Sections[1].Run, "upgrade was carried over")
	assert.Equal(t, latest, got.Sections[2].Run)

	data, err := marshal(got)
	require.NoError(t, err)
	golden(t, "merged.json.golden", data)
}

func TestTable(t *testing.T) {
	got := table(merge(fixture(), latest, []figures.Section{
		{Section: "build", Figures: []figures.Figure{{Key: "build.time", Name: "image build", Value: 2.1, Unit: "s", N: 5, Goal: "<= 2 s"}}},
	}))
	golden(t, "table.md.golden", []byte(got))
	assert.Contains(t, got, "| upgrade | roll of 3 nodes, total | 235 s | one plain reboot: 33.6 s | **7.00x** | <= 3.5x |")
	assert.Contains(t, got, `longest write \| gap`, "a | in a name is escaped")
	assert.Contains(t, got, "build: measured by `BENCH_ONLY=\"build verify\" hack/bench.sh` at commit `bbbbbbb-dirty`")
	assert.Contains(t, got, "upgrade, backup, zz: measured by `hack/bench.sh` at commit `aaaaaaa`")
	assert.Contains(t, table(Bench{}), "No figures recorded yet.")
}

func TestQuantity(t *testing.T) {
	for _, tc := range []struct {
		v          float64
		unit, want string
	}{
		{235.34, "s", "235 s"}, {33.64, "s", "33.6 s"}, {3.354, "s", "3.35 s"}, {0.1591, "s", "0.159 s"},
		{26, "MiB", "26 MiB"}, {1.2, "x", "1.20x"}, {0, "ms", "0 ms"}, {5, "", "5"},
	} {
		assert.Equal(t, tc.want, quantity(tc.v, tc.unit), "quantity(%v, %q)", tc.v, tc.unit)
	}
}

func TestReplaceTable(t *testing.T) {
	readme := "# x\n\nhand text\n\n" + beginMarker + "\nold table\n" + endMarker + "\n\nmore hand text\n"
	out, err := replaceTable([]byte(readme), "new table\n")
	require.NoError(t, err)
	want := "# x\n\nhand text\n\n" + beginMarker + "\n\nnew table\n\n" + endMarker + "\n\nmore hand text\n"
	assert.Equal(t, want, string(out))
	again, err := replaceTable(out, "new table\n")
	require.NoError(t, err)
	assert.Equal(t, want, string(again), "replacing twice changes nothing")

	for name, bad := range map[string]string{
		"no markers": "# x\n",
		"no end":     beginMarker + "\n",
		"reversed":   endMarker + "\n" + beginMarker + "\n",
		"two pairs":  beginMarker + endMarker + beginMarker + endMarker,
	} {
		_, err := replaceTable([]byte(bad), "t")
		assert.Error(t, err, name)
	}
}

// TestCommands runs record, merge and readme as hack/bench.sh does.
func TestCommands(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(figures.DirEnv, filepath.Join(dir, "sections"))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sections"), 0o755))
	var stdout, stderr bytes.Buffer
	sh := func(args ...string) error { return run(t.Context(), args, &stdout, &stderr) }

	require.NoError(t, sh("record", "-section", "build", "-key", "build.time", "-name", "image build",
		"-value", "3", "-unit", "s", "-ref", "two seconds", "-refvalue", "2", "-goal", "<= 2 s", "-n", "5"))
	assert.Error(t, sh("record", "-key", "k"), "no section")
	assert.Error(t, sh("record", "-section", "build", "-key", "Bad Key"))

	out := filepath.Join(dir, "bench.json")
	require.NoError(t, sh("merge", "-o", out, "-commit", "c0ffee", "-accel", "tcg", "-nproc", "2"))
	b, err := readBench(out)
	require.NoError(t, err)
	require.Len(t, b.Sections, 1)
	assert.Equal(t, "c0ffee", b.Commit)
	assert.Equal(t, 1.5, b.Sections[0].Figures[0].Ratio)

	readme := filepath.Join(dir, "README.md")
	require.NoError(t, os.WriteFile(readme, []byte("a\n"+beginMarker+"\n"+endMarker+"\nb\n"), 0o644))
	require.NoError(t, sh("readme", out, readme))
	text, err := os.ReadFile(readme)
	require.NoError(t, err)
	assert.Contains(t, string(text), "| build | image build | 3 s (median of 5) | two seconds: 2 s | **1.50x** | <= 2 s |")
	assert.True(t, strings.HasSuffix(string(text), endMarker+"\nb\n"))

	assert.Error(t, sh("readme", filepath.Join(dir, "missing.json"), readme))
	assert.Error(t, sh("nonsense"))
	assert.Error(t, sh())
}
