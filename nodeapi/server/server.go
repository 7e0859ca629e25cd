// Package server serves the etcdbox node API (DESIGN §8) inside the init:
// HTTPS with mutual TLS on its own port, the wire format of package nodeapi.
//
// The server owns transport, authentication, authorization and request
// checking; the init supplies the data and the actions through Node:
//
//	srv, err := server.New(server.Config{PKIDir: "/var/lib/etcdbox/state/pki", Node: n, Log: logf})
//	l, err := net.Listen("tcp", ":9379")
//	go srv.Serve(l) // returns http.ErrServerClosed after Shutdown
//	...
//	srv.Shutdown(ctx) // on the way down, so an accepted reboot's answer is sent
//
// TLS: the server presents PKIDir/server.crt and server.key and trusts client
// certificates issued by PKIDir/ca.crt. All three files are read again on
// every handshake, so a renewed leaf (written with pki.WriteFileAtomic) or a
// CA bundle is used without a restart. A client without a certificate from
// that CA, or speaking plain HTTP, is refused before any handler runs.
//
// Authorization: read-only endpoints (GET) accept any client certificate
// from the CA, so nodes can read each other's status and formation
// answers (node leaves, not only the admin); mutating ones (POST)
// require the admin certificate, whose common name is pki.AdminCommonName.
// A node that holds the CA key (a seed with pki.caKey) could mint such a
// certificate; the CA key is the trust boundary, not the common name.
//
// The API runs no shell and no command of the caller's choosing: every
// action is a method of Node.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// Files the server reads from Config.PKIDir.
const (
	CACertFile     = pki.CACertFile
	ServerCertFile = "server.crt"
	ServerKeyFile  = "server.key"
)

// ErrBusy is what Node methods wrap when they cannot take the request now:
// a shutdown is under way, or another image is being staged. The server
// answers 409 Conflict with the error's text.
var ErrBusy = errors.New("busy")

// ErrRefused is what Node methods wrap when a well-formed request would
// break a rule (a decommission that would leave the voters without a
// healthy quorum, say): 409 Conflict with the error's text.
var ErrRefused = errors.New("refused")

// ErrBadRequest is what Node methods wrap when the request itself is
// wrong (another node's name, a name that is not an expected initial
// member): 400 Bad Request with the error's text.
var ErrBadRequest = errors.New("bad request")

// Node is what the server needs from the init. Methods are called
// concurrently, from the request's goroutine; none may block for long.
type Node interface {
	// Status reports the node. Fields it cannot tell stay zero; an error
	// means no status at all (500). The server fills Status.Upgrade from
	// Upgrade.
	Status(ctx context.Context) (nodeapi.Status, error)
	// Logs returns up to the last n lines of the init's log and etcd's,
	// oldest first, without newlines. The server cuts longer answers.
	Logs(n int) []string
	// LogsSince returns the complete lines after sequence number seq
	// (lines are numbered from 1 as they end; a seq from before the node
	// restarted gives every line it holds), the number of the last one
	// (seq when there is none), and how many after seq it no longer
	// holds. It is what `etcdbox logs -f` polls.
	LogsSince(seq uint64) (lines []string, last, dropped uint64)
	// Reboot starts an orderly reboot and returns without waiting for it:
	// the answer is written after Reboot returns, and the shutdown should
	// call Server.Shutdown, which waits for that answer to be sent.
	Reboot(req nodeapi.RebootRequest) error
	// StageUpgrade starts staging ref (already checked with
	// nodeapi.CheckImageRef) into the inactive slot and returns; the work
	// goes on in the background and shows in Upgrade. ctx is the request's
	// and ends with it, so the staging must not run under it. Staging the
	// ref that is already staged or staging should succeed (idempotent).
	// hold stages the slot held (nodeapi.PhaseHeld): it does not boot
	// until ArmUpgrade.
	StageUpgrade(ctx context.Context, ref string, hold bool) error
	// ArmUpgrade arms the held slot, which must hold ref, so that the
	// next boot tries it, and returns once that is on the disk. Arming
	// an armed slot that was never booted succeeds (idempotent). A slot
	// that holds another image, or none, is ErrRefused.
	ArmUpgrade(ctx context.Context, ref string) error
	// Upgrade reports the upgrade agent's progress.
	Upgrade() nodeapi.UpgradeProgress
	// Snapshot takes an etcd snapshot of the local member, keeps it on
	// DATA and returns once it is on the disk (the roll takes one before
	// each node's step). It may take a while; ctx is the request's.
	Snapshot(ctx context.Context) (nodeapi.Snapshot, error)
	// Backups lists the snapshots the node keeps, oldest first.
	Backups() ([]nodeapi.Snapshot, error)
	// OpenBackup opens the kept snapshot called name (a name Backups
	// lists, never a path); a missing one is an error wrapping
	// fs.ErrNotExist.
	OpenBackup(name string) (io.ReadCloser, nodeapi.Snapshot, error)
	// Backup takes a backup now, as the schedule does (a follower's
	// snapshot, verified, kept), and returns once it is kept.
	Backup(ctx context.Context) (nodeapi.Snapshot, error)
	// Decommission removes this node's member from the cluster for good
	// (req.Node must be its name; the server checked it is not empty),
	// writes its tombstone, and returns; then the node powers off, and the
	// shutdown should call Server.Shutdown so that the answer is sent.
	// ctx is the request's.
	Decommission(ctx context.Context, req nodeapi.DecommissionRequest) (nodeapi.Decommissioned, error)
	// Formation answers the formation handshake (DESIGN §5). It must
	// answer before etcd starts, and after.
	Formation(ctx context.Context) (nodeapi.Formation, error)
	// FormWithout records the operator's decision to form the cluster
	// without the named expected initial members and returns the
	// answer after it. A node that started its formation refuses
	// (ErrBusy); bad names are an error wrapping ErrBadRequest.
	FormWithout(ctx context.Context, names []string) (nodeapi.Formation, error)
	// Recover makes this node, the survivor of a lost quorum, the one
	// member of a new cluster (DESIGN §5), or resumes that recovery, and
	// returns once the new member is restored (it then starts in the
	// background). A token that is not this node's (another cluster, a
	// replay) or a quorum that is not lost is ErrRefused; a recovery
	// already done answers NoOp.
	Recover(ctx context.Context, req nodeapi.RecoverRequest) (nodeapi.Recovery, error)
	// Restore takes one step of a restore from a snapshot (DESIGN §5):
	// fence (stop etcd until the restore goes on), seed (restore the
	// received snapshot as the one member of a new cluster) or rejoin
	// (move the data aside and join the new cluster). A step already
	// taken changes nothing; a restore done answers NoOp; a token of
	// another operation under way is ErrRefused.
	Restore(ctx context.Context, req nodeapi.RestoreRequest) (nodeapi.Recovery, error)
	// ReceiveSnapshot keeps the snapshot of the fenced restore token,
	// read from r, once it verifies against the token's SHA-256 (a bad
	// one is ErrBadRequest).
	ReceiveSnapshot(ctx context.Context, token string, r io.Reader) (nodeapi.Recovery, error)
	// CARotation says where the node is in a CA rotation.
	CARotation() (nodeapi.CARotation, error)
	// RotateCA applies one phase of a CA rotation (DESIGN §6) and
	// returns once it is in effect (etcd restarted and serving, where
	// the phase restarts it). A phase the node passed answers its state
	// unchanged; a phase out of order, or another rotation while one is
	// under way, is ErrRefused.
	RotateCA(ctx context.Context, req nodeapi.CARotationRequest) (nodeapi.CARotation, error)
}

// Config configures a Server.
type Config struct {
	// PKIDir holds ca.crt, server.crt and server.key (the node's
	// state/pki). Required.
	PKIDir string
	// Node answers the requests. Required.
	Node Node
	// Log receives one line per mutating request and per refused TLS
	// handshake; nil discards them.
	Log func(format string, args ...any)
}

// Server is the node API server.
type Server struct {
	cfg Config
	hs  *http.Server
	// logID names this server's lifetime, which is the init's: a
	// follower of the log that sees another one knows the node
	// restarted and its line numbers started again.
	logID string
}

// Timeouts and limits of the server.
const (
	statusTimeout = 15 * time.Second
	maxBody       = 64 << 10
)

// New checks cfg and that the PKI files load, and returns a server that is
// not yet listening.
func New(cfg Config) (*Server, error) {
	if cfg.PKIDir == "" {
		return nil, errors.New("node API: no PKI directory")
	}
	if cfg.Node == nil {
		return nil, errors.New("node API: no node")
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	s := &Server{cfg: cfg, logID: rand.Text()}
	if _, err := s.loadTLS(); err != nil {
		return nil, fmt.Errorf("node API: %w", err)
	}
	s.hs = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          log.New(logWriter(cfg.Log), "", 0),
	}
	return s, nil
}

// Serve accepts connections on l and speaks TLS on them until Shutdown or
// Close; then it returns http.ErrServerClosed.
func (s *Server) Serve(l net.Listener) error {
	return s.hs.Serve(tls.NewListener(l, s.tlsConfig()))
}

// ListenAndServe listens on the TCP address addr (":9379") and calls Serve.
func (s *Server) ListenAndServe(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("node API: %w", err)
	}
	return s.Serve(l)
}

// Shutdown stops accepting connections and waits, until ctx ends, for the
// requests under way to be answered.
func (s *Server) Shutdown(ctx context.Context) error { return s.hs.Shutdown(ctx) }

// Close closes the listeners and connections at once.
func (s *Server) Close() error { return s.hs.Close() }

// tlsConfig returns the listener's configuration: every handshake gets a
// configuration loaded afresh from PKIDir.
func (s *Server) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			tc, err := s.loadTLS()
			if err != nil {
				s.cfg.Log("node API: %v", err)
			}
			return tc, err
		},
	}
}

// loadTLS reads the server certificate and the client CA. The files are
// small and handshakes rare (operators and the roll), so nothing is cached
// and a renewal needs no signal.
func (s *Server) loadTLS() (*tls.Config, error) {
	certPath, keyPath := filepath.Join(s.cfg.PKIDir, ServerCertFile), filepath.Join(s.cfg.PKIDir, ServerKeyFile)
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("load server certificate %s: %w", certPath, err)
	}
	caPath := filepath.Join(s.cfg.PKIDir, CACertFile)
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("load client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("load client CA %s: no certificate", caPath)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{"http/1.1"},
	}, nil
}

// logWriter adapts Config.Log to the http.Server's error log.
type logWriter func(format string, args ...any)

func (f logWriter) Write(p []byte) (int, error) {
	f("node API: %s", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
