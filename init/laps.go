package main

import (
	"fmt"
	"strings"
	"time"
)

// laps times the steps of a sequence, such as the shutdown, so its log
// line says where the time went: "API 2ms, parts 217ms, etcd 490ms".
// Steps under a millisecond are left out, to keep the line short.
type laps struct {
	last  time.Time
	steps []string
	now   func() time.Time
}

func newLaps(start time.Time) *laps {
	return &laps{last: start, now: time.Now}
}

// lap ends the step named name, begun when the last one ended.
func (l *laps) lap(name string) {
	now := l.now()
	if d := now.Sub(l.last); d >= time.Millisecond {
		l.steps = append(l.steps, fmt.Sprintf("%s %s", name, d.Round(time.Millisecond)))
	}
	l.last = now
}

func (l *laps) String() string {
	if len(l.steps) == 0 {
		return "every step under 1ms"
	}
	return strings.Join(l.steps, ", ")
}
