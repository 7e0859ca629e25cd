package main

import (
	"context"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
)

// checkTimeout bounds porcupine's check of one writer's history.
const checkTimeout = 3 * time.Minute

// writerFigures is what one run of the writer saw.
type writerFigures struct {
	ops, acked int
	gap        time.Duration
	check      porcupine.CheckResult
	err        error // of the final reads
	// start is the writer's start, the zero of history's Call and
	// Return times, for the roll's picture.
	start   time.Time
	history []porcupine.Operation
}

func (f writerFigures) String() string {
	s := fmt.Sprintf("%d acknowledged puts (%d operations), longest write gap %s, porcupine: %s",
		f.acked, f.ops, f.gap.Round(10*time.Millisecond), checkName(f.check))
	if f.err != nil {
		s += fmt.Sprintf(" (%v)", f.err)
	}
	return s
}

func checkName(c porcupine.CheckResult) string {
	switch c {
	case porcupine.Ok:
		return "Ok"
	case porcupine.Illegal:
		return "Illegal (an acknowledged write was lost)"
	default:
		return "Unknown (the check timed out)"
	}
}

// writer is a running writer and when it started.
type writer struct {
	*kvwriter.Writer
	start time.Time
}

// startWriter starts the writer on every node. Each writer begins on empty
// keys: porcupine's model starts from nothing, so a value left by an
// earlier writer would read as a lost write.
func (r *rig) startWriter(ctx context.Context) (*writer, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := r.cli.Delete(dctx, kvwriter.Prefix, clientv3.WithPrefix()); err != nil {
		return nil, fmt.Errorf("clear the writer's keys: %w", err)
	}
	// kvwriter.Start takes its zero before it dials: this is at most
	// microseconds before it.
	start := time.Now()
	w, err := kvwriter.Start(r.c.Endpoints(), r.tc)
	if err != nil {
		return nil, fmt.Errorf("start the writer: %w", err)
	}
	return &writer{Writer: w, start: start}, nil
}

// stopWriter stops w and checks its history.
func (r *rig) stopWriter(w *writer) writerFigures {
	res, err := w.Stop(30 * time.Second)
	return writerFigures{ops: len(res.History), acked: res.Acked, gap: res.Gap, check: res.Check(checkTimeout), err: err,
		start: w.start, history: res.History}
}
