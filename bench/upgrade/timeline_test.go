package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
)

const sec = time.Second

func TestBands(t *testing.T) {
	zero := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return zero.Add(d) }
	end := at(100 * sec)

	// A follower: staged ahead, its turn, reboot, gate, blessed.
	got := bands(nodeTimes{hold: at(1 * sec), held: at(11 * sec), turn: at(20 * sec), reboot: at(22 * sec), up: at(40 * sec), blessed: at(50 * sec)}, zero, end)
	assert.Equal(t, []band{
		{phaseStaging, 1 * sec, 11 * sec}, {phaseHandOver, 20 * sec, 22 * sec}, {phaseReboot, 22 * sec, 40 * sec},
		{phaseGate, 40 * sec, 50 * sec}, {phaseBlessed, 50 * sec, 100 * sec},
	}, got)

	// Never seen held, and never answering before blessed: each phase
	// lasts until the next one seen.
	got = bands(nodeTimes{hold: at(1 * sec), turn: at(20 * sec), reboot: at(22 * sec), blessed: at(50 * sec)}, zero, end)
	assert.Equal(t, []band{
		{phaseStaging, 1 * sec, 20 * sec}, {phaseHandOver, 20 * sec, 22 * sec}, {phaseReboot, 22 * sec, 50 * sec}, {phaseBlessed, 50 * sec, 100 * sec},
	}, got)

	// A node the roll never reached: staged only.
	got = bands(nodeTimes{hold: at(1 * sec), held: at(5 * sec)}, zero, end)
	assert.Equal(t, []band{{phaseStaging, 1 * sec, 5 * sec}}, got)
}

func TestWrites(t *testing.T) {
	put := func(v int, call, ret int64, unknown bool) porcupine.Operation {
		return porcupine.Operation{Input: kvwriter.Input{Put: true, Key: "k", Value: v, Expect: v - 1}, Call: call, Return: ret, Output: kvwriter.Output{Value: v, Set: !unknown, Unknown: unknown}}
	}
	got := writes([]porcupine.Operation{
		put(1, int64(sec), int64(sec+5*time.Millisecond), false),
		{Input: kvwriter.Input{Key: "k"}, Call: int64(2 * sec), Return: int64(3 * sec), Output: kvwriter.Output{Value: 1}},
		put(2, int64(3*sec), math.MaxInt64, true),
		// Under way when the writer stopped: no failure, left out.
		{Input: kvwriter.Input{Put: true, Key: "k", Value: 3}, Call: int64(4 * sec), Return: math.MaxInt64, Output: kvwriter.Output{Unknown: true, Stopped: true}},
	})
	assert.Equal(t, []write{{at: sec, latency: 5 * time.Millisecond}, {at: 3 * sec, failed: true}}, got)
}

// synthetic is a roll of three nodes over 120 s under a writer whose
// latency rises during each reboot, with two failed puts.
func synthetic() timeline {
	tl := timeline{title: "rolling upgrade <v1 -> v2> & co", end: 120 * sec}
	for i := time.Duration(0); i < 1200; i++ {
		lat := 5 * time.Millisecond
		if i%400 > 250 && i%400 < 300 {
			lat = 800 * time.Millisecond
		}
		tl.writes = append(tl.writes, write{at: i * 100 * time.Millisecond, latency: lat})
	}
	tl.writes = append(tl.writes, write{at: 30 * sec, failed: true}, write{at: 70 * sec, failed: true})
	for i, name := range []string{"n2", "n3", "n1"} {
		off := time.Duration(i) * 35 * sec
		tl.nodes = append(tl.nodes, nodeRow{name: name, bands: []band{
			{phaseStaging, 1 * sec, 12 * sec}, {phaseHandOver, 15*sec + off, 17*sec + off}, {phaseReboot, 17*sec + off, 35*sec + off},
			{phaseGate, 35*sec + off, 45*sec + off}, {phaseBlessed, 45*sec + off, 120 * sec},
		}})
	}
	return tl
}

func TestWriteSVG(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, writeSVG(&buf, synthetic()))
	if path := os.Getenv("BENCH_TEST_SVG"); path != "" {
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	}

	// Well-formed XML, an svg root, and every band with its node and
	// phase.
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	perNode := map[string]map[string]int{}
	var root string
	var failed, lines int
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the SVG is not well-formed XML")
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = el.Name.Local
		}
		attr := map[string]string{}
		for _, a := range el.Attr {
			attr[a.Name.Local] = a.Value
		}
		switch {
		case el.Name.Local == "rect" && attr["class"] == "band":
			if perNode[attr["data-node"]] == nil {
				perNode[attr["data-node"]] = map[string]int{}
			}
			perNode[attr["data-node"]][attr["data-phase"]]++
		case el.Name.Local == "path" && attr["class"] == "failed":
			failed++
		case el.Name.Local == "line":
			lines++
		}
	}
	assert.Equal(t, "svg", root)
	want := map[string]int{phaseStaging: 1, phaseHandOver: 1, phaseReboot: 1, phaseGate: 1, phaseBlessed: 1}
	assert.Equal(t, map[string]map[string]int{"n1": want, "n2": want, "n3": want}, perNode)
	assert.Equal(t, 2, failed, "one mark per failed put's column")
	assert.Greater(t, lines, 100, "the puts are drawn")
	assert.Less(t, buf.Len(), 200_000, "puts are drawn per pixel column, not one by one")
	assert.Contains(t, buf.String(), "rolling upgrade &lt;v1 -&gt; v2&gt; &amp; co")
}

func TestWriteSVGEmpty(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, writeSVG(&buf, timeline{title: "nothing"}))
	require.NoError(t, xml.Unmarshal(buf.Bytes(), new(struct{})), "an empty timeline still draws a well-formed picture")
}
