package member

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// RemovedMessage is the error etcd reports when the cluster has removed
// its member: the member stops (and etcd exits 0), and restarting it on
// the same data gives the same error. Only etcd's own log entry with it
// counts (see RemovedWatch): the sentence alone appears wherever etcd
// logs what a stranger sent it, such as a TLS client's server name.
const RemovedMessage = "the member has been permanently removed from the cluster"

// etcd 3.7 logs a removal as one zap JSON entry, from the server's run
// loop when rafthttp (a peer answered 410 Gone or 403) or the apply of
// the removal reports it on the server's error channel:
//
//	{"level":"warn","ts":"…","caller":"etcdserver/server.go:849","msg":"server error","error":"the member has been permanently removed from the cluster"}
//
// followed by "data-dir used by this member must be removed". That
// channel carries no other error.
const (
	removedEntryLevel  = "warn"
	removedEntryMsg    = "server error"
	removedEntryCaller = "etcdserver/"
)

// startEntryMsgs are etcd's entries that name its member and cluster, in
// "local-member-id" and "cluster-id" (hex), as it starts.
var startEntryMsgs = []string{"starting local member", "restarting local member", "forcing restart member"}

// MaxLogLine bounds a line of etcd's log that RemovedWatch parses; a
// longer line is skipped up to its end, never buffered.
const MaxLogLine = 64 << 10

// logEntry is the part of one of etcd's zap JSON log entries that
// RemovedWatch reads. Fields etcd logs with various types are raw.
type logEntry struct {
	Level         string          `json:"level"`
	TS            json.RawMessage `json:"ts"`
	Caller        string          `json:"caller"`
	Msg           string          `json:"msg"`
	Error         json.RawMessage `json:"error"`
	LocalMemberID json.RawMessage `json:"local-member-id"`
	ClusterID     json.RawMessage `json:"cluster-id"`
}

// SupervisedPrefix is what the init's supervisor (init/supervise, child
// "etcd") puts before each line of etcd's output. parseEntry strips it
// once, exactly, when present; a line must then be one whole JSON object.
const SupervisedPrefix = "etcd: "

// parseEntry parses one line as an etcd zap JSON entry: a JSON object
// with level, ts, caller and msg, alone on its line or after
// SupervisedPrefix.
func parseEntry(line []byte) (logEntry, bool) {
	var e logEntry
	line = bytes.TrimSpace(bytes.TrimPrefix(line, []byte(SupervisedPrefix)))
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
		return logEntry{}, false
	}
	return e, e.Level != "" && len(e.TS) > 0 && e.Caller != "" && e.Msg != ""
}

// stringField is a JSON string field's value, "" for another type.
func stringField(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// IsRemovedEntry reports whether line is etcd's own log entry saying that
// its member was removed: an etcd JSON entry whose msg is exactly "server
// error" and whose error is exactly RemovedMessage. Text elsewhere in a
// line, such as a server name etcd logs for a failed TLS handshake, never
// matches: zap escapes what it logs, so no value can end its entry.
func IsRemovedEntry(line []byte) bool {
	e, ok := parseEntry(line)
	return ok && e.Level == removedEntryLevel && e.Msg == removedEntryMsg &&
		strings.HasPrefix(e.Caller, removedEntryCaller) && stringField(e.Error) == RemovedMessage
}

// startEntryIDs returns the cluster and member IDs of an etcd entry that
// starts its member.
func startEntryIDs(line []byte) (cluster, member uint64, ok bool) {
	e, ok := parseEntry(line)
	if !ok || !slices.Contains(startEntryMsgs, e.Msg) {
		return 0, 0, false
	}
	m, err1 := strconv.ParseUint(stringField(e.LocalMemberID), 16, 64)
	c, err2 := strconv.ParseUint(stringField(e.ClusterID), 16, 64)
	if err1 != nil || err2 != nil || m == 0 {
		return 0, 0, false
	}
	return c, m, true
}

// ErrStillMember: the cluster's member list still has the member that
// etcd's log said was removed; its data must stay.
var ErrStillMember = errors.New("member still in the cluster's member list")

// ConfirmRemoved asks the cluster behind cli for a linearizable member
// list, which only a quorum can give, and returns an error wrapping
// ErrRemoved when member memberID is not in it: the removal is confirmed
// and the member's data may move aside. It wraps ErrStillMember when the
// member is listed, and fails with another error when no quorum answered,
// when the answer comes from memberID itself, or from another cluster
// than clusterID (0: unchecked). Only ErrRemoved allows moving data.
//
// cli should point at the other nodes' client URLs, not at this node's.
func ConfirmRemoved(ctx context.Context, cli *clientv3.Client, clusterID, memberID uint64) error {
	if memberID == 0 {
		return errors.New("confirm removal: no member ID")
	}
	lctx, cancel := context.WithTimeout(ctx, opTimeout)
	resp, err := cli.MemberList(lctx)
	cancel()
	if err != nil {
		return fmt.Errorf("confirm removal of %x: member list: %w", memberID, err)
	}
	h := resp.Header
	switch {
	case h.GetMemberId() == memberID:
		return fmt.Errorf("confirm removal of %x: the member list came from that member itself", memberID)
	case clusterID != 0 && h.GetClusterId() != clusterID:
		return fmt.Errorf("confirm removal of %x: member %x answered for cluster %x, not %x", memberID, h.GetMemberId(), h.GetClusterId(), clusterID)
	}
	for _, m := range resp.Members {
		if m.ID == memberID {
			return fmt.Errorf("confirm removal of %x: member %x lists it as %s: %w", memberID, h.GetMemberId(), fromPB(m), ErrStillMember)
		}
	}
	return fmt.Errorf("member %x: not in the member list of cluster %x (answered by %x, linearizable): %w",
		memberID, h.GetClusterId(), h.GetMemberId(), ErrRemoved)
}

// RemovedWatch is an io.Writer to tee etcd's stderr through, for one etcd
// run. It reads etcd's JSON log line by line and matches only etcd's own
// entry for a removal (IsRemovedEntry); lines longer than MaxLogLine are
// skipped. It learns the member's and the cluster's ID from the entry
// etcd logs as it starts the member.
//
// Said is closed on etcd's entry. Removed and Seen say whether the
// removal is confirmed: with ConfirmThrough, only once ConfirmRemoved has
// found the member gone from a quorum's member list; without it, on
// etcd's entry alone, and the caller must call ConfirmRemoved itself
// before it moves any data (Facts.RemovedFromCluster, MoveAside).
type RemovedWatch struct {
	confirmCtx context.Context
	confirm    func(ctx context.Context, clusterID, memberID uint64) error
	logf       Logf

	mu         sync.Mutex
	line       []byte
	skipping   bool // in a line longer than MaxLogLine
	cluster    uint64
	member     uint64
	confirming bool

	saidOnce, removedOnce sync.Once
	said, removed         chan struct{}
}

// WatchOption configures a RemovedWatch.
type WatchOption func(*RemovedWatch)

// ConfirmThrough makes the watch confirm etcd's word with ConfirmRemoved
// through cli (the other nodes' client URLs) before Removed fires. It
// retries with backoff while no quorum answers, until ctx ends; a member
// list that still has the member is logged and nothing fires until etcd
// says so again. Lines go to logf.
func ConfirmThrough(ctx context.Context, cli *clientv3.Client, logf Logf) WatchOption {
	return func(w *RemovedWatch) {
		w.confirmCtx, w.logf = ctx, logf
		w.confirm = func(ctx context.Context, clusterID, memberID uint64) error {
			return ConfirmRemoved(ctx, cli, clusterID, memberID)
		}
	}
}

// NewRemovedWatch returns a watch for one etcd run.
func NewRemovedWatch(opts ...WatchOption) *RemovedWatch {
	w := &RemovedWatch{said: make(chan struct{}), removed: make(chan struct{})}
	for _, o := range opts {
		o(w)
	}
	if w.logf == nil {
		w.logf = func(string, ...any) {}
	}
	return w
}

// Write scans p; it never fails and never blocks on the confirmation.
func (w *RemovedWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		if !w.skipping {
			if len(w.line)+len(chunk) > MaxLogLine {
				w.skipping, w.line = true, w.line[:0]
			} else {
				w.line = append(w.line, chunk...)
			}
		}
		if i < 0 {
			break
		}
		if !w.skipping {
			w.scanLine(w.line)
		}
		w.line, w.skipping = w.line[:0], false
	}
	return n, nil
}

// scanLine handles one complete line; w.mu is held.
func (w *RemovedWatch) scanLine(line []byte) {
	// etcd writes this for every log line, and waits for it: lines that
	// cannot be either entry are not parsed as JSON at all.
	if !bytes.Contains(line, []byte(RemovedMessage)) && !bytes.Contains(line, []byte(`"local-member-id"`)) {
		return
	}
	if c, m, ok := startEntryIDs(line); ok {
		w.cluster, w.member = c, m
		return
	}
	if !IsRemovedEntry(line) {
		return
	}
	w.saidOnce.Do(func() { close(w.said) })
	if w.confirm == nil {
		w.removedOnce.Do(func() { close(w.removed) })
		return
	}
	if !w.confirming {
		w.confirming = true
		go w.confirmLoop(w.cluster, w.member)
	}
}

// confirmLoop confirms a removal etcd logged, retrying while no quorum
// answers.
func (w *RemovedWatch) confirmLoop(cluster, member uint64) {
	defer func() {
		w.mu.Lock()
		w.confirming = false
		w.mu.Unlock()
	}()
	if member == 0 {
		w.logf("membership: etcd says this member was removed, but it logged no member ID to confirm with; keeping its data")
		return
	}
	delay := 250 * time.Millisecond
	for {
		err := w.confirm(w.confirmCtx, cluster, member)
		switch {
		case errors.Is(err, ErrRemoved):
			w.logf("membership: etcd says this member was removed; confirmed: %v", err)
			w.removedOnce.Do(func() { close(w.removed) })
			return
		case errors.Is(err, ErrStillMember):
			w.logf("membership: etcd says this member was removed, but %v; keeping its data", err)
			return
		}
		w.logf("membership: etcd says this member was removed; not confirmed yet: %v; retrying in %s", err, delay)
		t := time.NewTimer(delay)
		select {
		case <-w.confirmCtx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// Said is closed once etcd's own log entry said that its member was
// removed, confirmed or not.
func (w *RemovedWatch) Said() <-chan struct{} { return w.said }

// Removed is closed once the removal is confirmed (see RemovedWatch).
func (w *RemovedWatch) Removed() <-chan struct{} { return w.removed }

// Seen reports whether Removed is closed.
func (w *RemovedWatch) Seen() bool {
	select {
	case <-w.removed:
		return true
	default:
		return false
	}
}

// MemberID returns the cluster and member IDs etcd logged as it started
// its member, 0 before.
func (w *RemovedWatch) MemberID() (cluster, member uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cluster, w.member
}
