package main

import (
	"slices"
	"testing"
)

func TestPerfLines(t *testing.T) {
	out := " 0 / 60 B                                              !   0.00%\r 60 / 60 Booooooooooooooooooooooooooooooooooooooooooooooo! 100.00% 1m0sPASS: Throughput is 151 writes/s\n" +
		"Slowest request took too long: 1.183535s\nStddev too high: 0.2s\nFAIL\n"
	lines, ops := perfLines(out)
	want := []string{"PASS: Throughput is 151 writes/s", "Slowest request took too long: 1.183535s", "Stddev too high: 0.2s", "FAIL"}
	if !slices.Equal(lines, want) || ops != 151 {
		t.Errorf("got %q, %v", lines, ops)
	}
}

func TestInts(t *testing.T) {
	if got, err := ints(" 1,16, 256,"); err != nil || !slices.Equal(got, []int{1, 16, 256}) {
		t.Errorf("got %v, %v", got, err)
	}
	if got, err := ints(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v", got, err)
	}
	for _, bad := range []string{"0", "x", "1,-2"} {
		if _, err := ints(bad); err == nil {
			t.Errorf("%q taken", bad)
		}
	}
}

func TestPerfLinesLowThroughput(t *testing.T) {
	lines, ops := perfLines("FAIL: Throughput too low: 55 writes/s\nFAIL\n")
	if len(lines) != 2 || ops != 55 {
		t.Errorf("got %q, %v", lines, ops)
	}
}
