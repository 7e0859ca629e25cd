package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// The picture's geometry, in pixels.
const (
	svgWidth   = 960
	plotLeft   = 90  // node names and latency labels left of it
	plotRight  = 940 // svgWidth minus a margin
	plotTop    = 44
	plotHeight = 200
	rowsTop    = plotTop + plotHeight + 24
	rowHeight  = 24
	bandHeight = 16
)

// phaseColour is each phase's band colour.
var phaseColour = map[string]string{
	phaseStaging:  "#6baed6",
	phaseHandOver: "#fd8d3c",
	phaseReboot:   "#d62728",
	phaseGate:     "#9467bd",
	phaseBlessed:  "#74c476",
}

// writeSVG draws tl: the latency of each acknowledged put over time on a
// log scale (per pixel column, a line from the fastest to the slowest
// put asked in it), failed puts as red marks along the top, and below,
// one row per node with its phases as coloured bands. Each band has a
// <title> with its times, which a browser shows on hover.
func writeSVG(w io.Writer, tl timeline) error {
	end := tl.end
	for _, wr := range tl.writes {
		end = max(end, wr.at+wr.latency)
	}
	end = max(end, time.Second)
	x := func(d time.Duration) float64 {
		return plotLeft + float64(plotRight-plotLeft)*d.Seconds()/end.Seconds()
	}
	lo, hi := latencyRange(tl.writes)
	y := func(d time.Duration) float64 {
		ms := math.Max(float64(d)/float64(time.Millisecond), lo)
		return plotTop + plotHeight - plotHeight*math.Log10(ms/lo)/math.Log10(hi/lo)
	}
	rowsBottom := rowsTop + rowHeight*len(tl.nodes)
	height := rowsBottom + 70

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgWidth, height)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", plotLeft, esc(tl.title))

	// Time grid, through the plot and the rows, labelled below.
	step := timeStep(end)
	for t := time.Duration(0); t <= end; t += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(t), plotTop, x(t), rowsBottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(t), rowsBottom+14, esc(fmt.Sprintf("%.0f s", t.Seconds())))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">time since the writer started</text>`+"\n", (plotLeft+plotRight)/2, rowsBottom+30)

	// Latency axis: one line per decade.
	for ms := lo; ms <= hi*1.0001; ms *= 10 {
		d := time.Duration(ms * float64(time.Millisecond))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", plotLeft, y(d), plotRight, y(d))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", plotLeft-6, y(d)+4, esc(latencyLabel(ms)))
	}
	fmt.Fprintf(&b, `<text x="12" y="%d" transform="rotate(-90 12 %d)" text-anchor="middle">put latency</text>`+"\n",
		plotTop+plotHeight/2, plotTop+plotHeight/2)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", plotLeft, plotTop, plotRight-plotLeft, plotHeight)

	// Puts, per pixel column: the range of the acknowledged ones' latency,
	// and a mark where one failed.
	type column struct {
		min, max time.Duration
		acked    bool
		failed   int
	}
	cols := map[int]*column{}
	var order []int
	for _, wr := range tl.writes {
		c := int(x(wr.at))
		col, ok := cols[c]
		if !ok {
			col = &column{}
			cols[c] = col
			order = append(order, c)
		}
		switch {
		case wr.failed:
			col.failed++
		case !col.acked:
			col.min, col.max, col.acked = wr.latency, wr.latency, true
		default:
			col.min, col.max = min(col.min, wr.latency), max(col.max, wr.latency)
		}
	}
	b.WriteString(`<g stroke="#1f77b4" stroke-width="1">` + "\n")
	for _, c := range order {
		if col := cols[c]; col.acked {
			fmt.Fprintf(&b, `<line x1="%d.5" y1="%.1f" x2="%d.5" y2="%.1f"/>`+"\n", c, y(col.max), c, y(col.min)+1)
		}
	}
	b.WriteString("</g>\n")
	for _, c := range order {
		if col := cols[c]; col.failed > 0 {
			fmt.Fprintf(&b, `<path class="failed" d="M%d %d l4 -8 h-8 z" fill="#d62728"><title>%d failed put(s) at %.1f s</title></path>`+"\n",
				c, plotTop+1, col.failed, (time.Duration(float64(end) * float64(c-plotLeft) / float64(plotRight-plotLeft))).Seconds())
		}
	}

	// The nodes' phases.
	for i, n := range tl.nodes {
		top := rowsTop + i*rowHeight
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", plotLeft-6, top+bandHeight-4, esc(n.name))
		for _, bd := range n.bands {
			fmt.Fprintf(&b, `<rect class="band" data-node="%s" data-phase="%s" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`+"\n",
				esc(n.name), esc(bd.phase), x(bd.from), top, math.Max(x(bd.to)-x(bd.from), 1), bandHeight, phaseColour[bd.phase],
				esc(fmt.Sprintf("%s %s: %.1f s to %.1f s (%.1f s)", n.name, bd.phase, bd.from.Seconds(), bd.to.Seconds(), (bd.to-bd.from).Seconds())))
		}
	}
	if tl.end > 0 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333" stroke-dasharray="4 3"/>`+"\n", x(tl.end), plotTop, x(tl.end), rowsBottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="end">roll done</text>`+"\n", x(tl.end)-3, plotTop-4)
	}

	// Legend.
	lx, ly := plotLeft, rowsBottom+46
	for _, p := range phases {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly, phaseColour[p], lx+16, ly+10, esc(p))
		lx += 24 + 7*len(p)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#1f77b4" stroke-width="2"/><text x="%d" y="%d">acknowledged puts (fastest to slowest per pixel)</text>`+"\n",
		lx+6, ly, lx+6, ly+12, lx+16, ly+10)
	lx += 290
	fmt.Fprintf(&b, `<path d="M%d %d l4 -8 h-8 z" fill="#d62728"/><text x="%d" y="%d">failed put</text>`+"\n", lx+4, ly+11, lx+14, ly+10)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// latencyRange is the latency axis in milliseconds, whole decades
// around the acknowledged puts: at least 1 ms to 1 s.
func latencyRange(ws []write) (lo, hi float64) {
	lo, hi = 1, 1000
	for _, w := range ws {
		if w.failed || w.latency <= 0 {
			continue
		}
		ms := float64(w.latency) / float64(time.Millisecond)
		lo = math.Min(lo, math.Pow(10, math.Floor(math.Log10(ms))))
		hi = math.Max(hi, math.Pow(10, math.Ceil(math.Log10(ms))))
	}
	return lo, hi
}

func latencyLabel(ms float64) string {
	if ms >= 1000 {
		return fmt.Sprintf("%g s", ms/1000)
	}
	return fmt.Sprintf("%g ms", ms)
}

// timeStep is the time grid's step: the smallest of a few round steps
// that gives at most 12 lines.
func timeStep(end time.Duration) time.Duration {
	for _, s := range []int{1, 2, 5, 10, 15, 30, 60, 120, 300, 600} {
		if step := time.Duration(s) * time.Second; end/step <= 12 {
			return step
		}
	}
	return end / 10
}

// esc escapes text for XML.
func esc(s string) string { return html.EscapeString(s) }
