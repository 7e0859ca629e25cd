package main

import (
	"bytes"
	"io"
	"slices"

	"github.com/etcdbox/etcdbox/init/member"
	"github.com/etcdbox/etcdbox/seed"
)

// logFilter returns w, or a writer that drops etcd's log entries below the
// seed's etcd.logLevel before w (the ring, the console). etcd itself logs
// at info (debug when asked for), whatever the level: the removed-member
// watch, which is not behind this filter, reads its info entry that names
// the member and its warning that the member was removed.
func (m etcdMember) logFilter(w io.Writer) io.Writer {
	least := slices.Index(seed.LogLevels, m.LogLevel)
	if least <= slices.Index(seed.LogLevels, "info") {
		return w
	}
	return &levelFilter{w: w, least: least}
}

// levelFilter passes each line (the supervisor writes one per Write) that
// is not an etcd JSON entry of a level below least: a line that is not
// such an entry (a panic's trace, a Go runtime error) always passes.
type levelFilter struct {
	w     io.Writer
	least int
}

// levelPrefix begins each of etcd's zap JSON entries.
var levelPrefix = []byte(`{"level":"`)

func (f *levelFilter) Write(p []byte) (int, error) {
	line := bytes.TrimPrefix(p, []byte(member.SupervisedPrefix))
	if rest, ok := bytes.CutPrefix(line, levelPrefix); ok {
		level, _, found := bytes.Cut(rest, []byte(`"`))
		if string(level) == "dpanic" { // zap's; between error and panic
			level = []byte("panic")
		}
		if i := slices.Index(seed.LogLevels, string(level)); found && i >= 0 && i < f.least {
			return len(p), nil
		}
	}
	return f.w.Write(p)
}
