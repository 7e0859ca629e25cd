package member

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// The formation handshake (DESIGN §5).
//
// etcd derives a member's ID from its peer URLs, the initial cluster and
// the --initial-cluster-token, and the cluster ID from the members' IDs.
// With the token fixed (the cluster name, as before), a node whose disk
// was wiped and that bootstraps again gets its old member ID and the old
// cluster ID: the old members take it back as a voter that has forgotten
// its log and its votes, and two wiped disks of three form a quorum that
// loses acknowledged writes. A marker in state/ cannot prevent it: state/
// is on the disk that was lost.
//
// So a node bootstraps only on proof that the cluster never formed: every
// expected initial member answers over mutual TLS, before any of them
// starts etcd, that it has no data, never was a member and never started
// a formation; and the members then form with a token of their own, the
// cluster name and a hash of every member's nonce. A nonce is random,
// made once per node and written to state/ before it is first served, so
// the same disks give the same token on every node and across reboots
// during the formation, while any lost state gives a new nonce, a new
// token, and a new cluster and member IDs that the old members refuse.
// The token is written to state/ (Record.Token) before etcd starts with
// it, so a node whose etcd dir alone was lost never bootstraps again.
//
// A late member (its peers started the formation, whose nonces hold this
// node's nonce, and this node never started etcd) bootstraps into its
// slot with that token: its slot never ran, so it has no log or vote to
// forget. Any other answer with data, or a formation that does not hold
// this node's nonce (the old code's clusters have none), means the
// cluster formed: the node waits until it can join as a learner.

// RecordFile is the formation record's file in the state directory.
const RecordFile = "formation.json"

// Record is a node's formation state, kept in state/ (RecordFile).
type Record struct {
	// Nonce is random, made once, persisted before it is served.
	Nonce string `json:"nonce"`
	// Token is the committed --initial-cluster-token: set before etcd
	// first starts with --initial-cluster-state=new, never cleared.
	Token string `json:"token,omitempty"`
	// Nonces are the nonces of the formation's members, by name.
	Nonces map[string]string `json:"nonces,omitempty"`
	// Without are the expected initial members the operator told this
	// node to form without.
	Without []string `json:"without,omitempty"`
}

// Started reports whether the node committed to a formation.
func (r Record) Started() bool { return r.Token != "" }

// Store reads and writes a node's Record. It is safe for concurrent use:
// the node API and the member loop share one.
type Store struct {
	path string
	mu   sync.Mutex
}

// NewStore returns the store of the record in stateDir.
func NewStore(stateDir string) *Store { return &Store{path: filepath.Join(stateDir, RecordFile)} }

// Load returns the record, making one with a fresh nonce (written to the
// disk before Load returns) when there is none.
func (s *Store) Load() (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load()
}

// Update applies f to the record and writes the result before it returns
// it. An error from f leaves the record as it was.
func (s *Store) Update(f func(*Record) error) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.load()
	if err != nil {
		return Record{}, err
	}
	if err := f(&r); err != nil {
		return Record{}, err
	}
	if err := s.write(r); err != nil {
		return Record{}, err
	}
	return r, nil
}

func (s *Store) load() (Record, error) {
	var r Record
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Record{}, fmt.Errorf("read formation record: %w", err)
	default:
		if err := json.Unmarshal(b, &r); err != nil {
			return Record{}, fmt.Errorf("read formation record %s: %w", s.path, err)
		}
	}
	if r.Nonce != "" {
		return r, nil
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Record{}, fmt.Errorf("make formation nonce: %w", err)
	}
	r.Nonce = hex.EncodeToString(raw[:])
	return r, s.write(r)
}

// write replaces the record atomically: temporary file, fsync, rename,
// fsync of the directory.
func (s *Store) write(r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write formation record: %w", err)
	}
	tmp := s.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write formation record: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write formation record %s: %w", s.path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Token is the --initial-cluster-token of a formation: the cluster name
// and the first 16 hex digits of a SHA-256 over the members' names and
// nonces, in name order. Every member computes it from the same answers.
func Token(cluster string, nonces map[string]string) string {
	names := make([]string, 0, len(nonces))
	for n := range nonces {
		names = append(names, n)
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s=%s\n", n, nonces[n])
	}
	return cluster + "-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Answer is one peer's reply to the formation handshake, or why there is
// none (Err).
type Answer struct {
	Name string
	Err  error
	nodeapi.Formation
}

// NoneServed reports whether every answer of as came, and says its node
// never was a member (it never served as a voter): then no peer's etcd
// can list the members yet, and a node need not wait out the member
// list's deadline. Deciding without the list is always allowed (the list
// may time out on a slow network): it leaves only the handshake's
// decisions, which bootstrap on proof or wait. A peer that started etcd
// in a formation but has not served counts: at a simultaneous first boot
// the late members then start in their slots a round sooner. False for
// no answers.
func NoneServed(as []Answer) bool {
	for _, a := range as {
		if a.Err != nil || a.WasMember {
			return false
		}
	}
	return len(as) > 0
}

// Unanswered reports whether some peer did not answer in as while none
// that answered ever served as a member: asking again may still show
// that none served (NoneServed). False once one served, since then the
// node waits for the member list whatever the others say.
func Unanswered(as []Answer) bool {
	missing := false
	for _, a := range as {
		switch {
		case a.Err != nil:
			missing = true
		case a.WasMember:
			return false
		}
	}
	return missing
}

// AskUntilAnswered asks the formation handshake (ask) until every peer
// answers or one says it served as a member (Unanswered is false), or
// ctx ends, waiting the duration every between two asks, and returns the
// last answers. At a cold formation the peers' node APIs come up at
// different moments: a peer that refused the first ask is asked again a
// moment later. Each ask is a whole new set of answers, never merged with
// an older one, so what NoneServed reads was said at one time.
func AskUntilAnswered(ctx context.Context, every time.Duration, ask func(context.Context) []Answer) []Answer {
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		as := ask(ctx)
		if !Unanswered(as) {
			return as
		}
		t.Reset(every)
		select {
		case <-ctx.Done():
			return as
		case <-t.C:
		}
	}
}

// names lists the names of as, comma-separated.
func names(as []Answer) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.Name
	}
	return strings.Join(s, ", ")
}
