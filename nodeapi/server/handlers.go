package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
)

// httpError is an answer other than 2xx: status and message.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) *httpError {
	return &httpError{code, fmt.Sprintf(format, args...)}
}

// endpoint is one method on one path. admin endpoints need the admin
// certificate; query lists the query parameters it takes.
type endpoint struct {
	method string
	admin  bool
	query  []string
	serve  func(s *Server, w http.ResponseWriter, r *http.Request) error
}

// routes maps paths to their endpoints. ServeMux would answer a wrong
// method with a plain-text 405; the API answers every error in JSON.
var routes = map[string][]endpoint{
	nodeapi.PathStatus:   {{method: http.MethodGet, serve: (*Server).status}},
	nodeapi.PathLogs:     {{method: http.MethodGet, query: []string{"lines", "after"}, serve: (*Server).logs}},
	nodeapi.PathReboot:   {{method: http.MethodPost, admin: true, serve: (*Server).reboot}},
	nodeapi.PathSnapshot: {{method: http.MethodPost, admin: true, serve: (*Server).snapshot}},
	// A snapshot holds every key of the cluster: only the admin reads one.
	nodeapi.PathBackups: {
		{method: http.MethodGet, admin: true, query: []string{"name"}, serve: (*Server).backups},
		{method: http.MethodPost, admin: true, serve: (*Server).takeBackup},
	},
	nodeapi.PathDecommission: {{method: http.MethodPost, admin: true, serve: (*Server).decommission}},
	nodeapi.PathFormation: {
		{method: http.MethodGet, serve: (*Server).formation},
		{method: http.MethodPost, admin: true, serve: (*Server).formWithout},
	},
	nodeapi.PathUpgrade: {
		{method: http.MethodGet, serve: (*Server).upgradeProgress},
		{method: http.MethodPost, admin: true, serve: (*Server).stageUpgrade},
	},
	nodeapi.PathUpgradeArm: {{method: http.MethodPost, admin: true, serve: (*Server).armUpgrade}},
	nodeapi.PathRecover:    {{method: http.MethodPost, admin: true, serve: (*Server).recover}},
	nodeapi.PathRestore:    {{method: http.MethodPost, admin: true, serve: (*Server).restore}},
	// The body is the snapshot file, not JSON.
	nodeapi.PathRestoreSnapshot: {{method: http.MethodPost, admin: true, query: []string{"token"}, serve: (*Server).restoreSnapshot}},
	nodeapi.PathCARotation: {
		{method: http.MethodGet, serve: (*Server).caRotation},
		{method: http.MethodPost, admin: true, serve: (*Server).rotateCA},
	},
}

// ServeHTTP routes, authorizes and checks a request, and answers errors in
// JSON.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := s.serve(w, r); err != nil {
		var he *httpError
		if !errors.As(err, &he) {
			he = errorf(http.StatusInternalServerError, "%v", err)
		}
		writeJSON(w, he.code, nodeapi.ErrorBody{Error: he.msg})
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) error {
	eps, ok := routes[r.URL.Path]
	if !ok {
		return errorf(http.StatusNotFound, "unknown path %q; the API has %s", r.URL.Path, strings.Join(paths(), ", "))
	}
	i := slices.IndexFunc(eps, func(e endpoint) bool { return e.method == r.Method })
	if i < 0 {
		var allow []string
		for _, e := range eps {
			allow = append(allow, e.method)
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		return errorf(http.StatusMethodNotAllowed, "method %s not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allow, " or "))
	}
	ep := eps[i]
	client, err := clientName(r)
	if err != nil {
		return err
	}
	if ep.admin && !pki.IsAdmin(r.TLS.VerifiedChains) {
		return errorf(http.StatusForbidden, "%s %s needs an admin certificate (issued by the cluster's root CA, etcdbox pki issue-admin); this client is %s", r.Method, r.URL.Path, client)
	}
	for k := range r.URL.Query() {
		if !slices.Contains(ep.query, k) {
			return errorf(http.StatusBadRequest, "unknown query parameter %q", k)
		}
	}
	if ep.admin {
		s.cfg.Log("node API: %s %s by %s from %s", r.Method, r.URL.Path, client, r.RemoteAddr)
	}
	return ep.serve(s, w, r)
}

// clientName names the verified client (pki.Identity): "admin alice",
// "node n2". The TLS layer already refused anything unverified; this
// guards a handler mounted without it.
func clientName(r *http.Request) (string, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return "", errorf(http.StatusUnauthorized, "a client certificate from the cluster CA is required")
	}
	return pki.Identity(r.TLS.VerifiedChains), nil
}

func paths() []string {
	var ps []string
	for p := range routes {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	st, err := s.cfg.Node.Status(ctx)
	if err != nil {
		return nodeError("status", err)
	}
	st.Upgrade = s.progress()
	writeJSON(w, http.StatusOK, st)
	return nil
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	n := nodeapi.DefaultLogLines
	if v := q["lines"]; len(v) > 0 {
		var err error
		n, err = strconv.Atoi(v[0])
		if err != nil || n < 1 || len(v) > 1 {
			return errorf(http.StatusBadRequest, "lines: want one positive integer, got %q", strings.Join(v, ","))
		}
		n = min(n, nodeapi.MaxLogLines)
	}
	h := w.Header()
	var lines []string
	if v := q["after"]; len(v) > 0 {
		after, err := strconv.ParseUint(v[0], 10, 64)
		if err != nil || len(v) > 1 {
			return errorf(http.StatusBadRequest, "after: want one line number (0 or more), got %q", strings.Join(v, ","))
		}
		// Complete lines after the number: the newest n with ?lines=
		// (the start of a follow), else the oldest MaxLogLines.
		var last, dropped uint64
		lines, last, dropped = s.cfg.Node.LogsSince(after)
		switch {
		case q.Has("lines") && len(lines) > n:
			lines = lines[len(lines)-n:]
		case len(lines) > nodeapi.MaxLogLines:
			last -= uint64(len(lines) - nodeapi.MaxLogLines)
			lines = lines[:nodeapi.MaxLogLines]
		}
		h.Set(nodeapi.HeaderLogLast, strconv.FormatUint(last, 10))
		h.Set(nodeapi.HeaderLogDropped, strconv.FormatUint(dropped, 10))
		h.Set(nodeapi.HeaderLogBoot, s.logID)
	} else {
		lines = s.cfg.Node.Logs(n)
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, b.String())
	return nil
}

func (s *Server) reboot(w http.ResponseWriter, r *http.Request) error {
	// The body is optional; an unknown field is refused, so a misspelt
	// option is not silently dropped.
	var req nodeapi.RebootRequest
	if err := decodeBody(w, r, &req, true); err != nil {
		return err
	}
	if err := s.cfg.Node.Reboot(req); err != nil {
		return nodeError("reboot", err)
	}
	writeJSON(w, http.StatusAccepted, nodeapi.Accepted{Message: "rebooting"})
	return nil
}

func (s *Server) stageUpgrade(w http.ResponseWriter, r *http.Request) error {
	var req nodeapi.UpgradeRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if err := nodeapi.CheckImageRef(req.Image); err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	if err := s.cfg.Node.StageUpgrade(r.Context(), req.Image, req.Hold); err != nil {
		return nodeError("stage upgrade", err)
	}
	writeJSON(w, http.StatusAccepted, s.progress())
	return nil
}

func (s *Server) armUpgrade(w http.ResponseWriter, r *http.Request) error {
	var req nodeapi.ArmRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if err := nodeapi.CheckImageRef(req.Image); err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	if err := s.cfg.Node.ArmUpgrade(r.Context(), req.Image); err != nil {
		return nodeError("arm upgrade", err)
	}
	writeJSON(w, http.StatusOK, s.progress())
	return nil
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := decodeBody(w, r, &req, true); err != nil {
		return err
	}
	snap, err := s.cfg.Node.Snapshot(r.Context())
	if err != nil {
		return nodeError("snapshot", err)
	}
	writeJSON(w, http.StatusOK, snap)
	return nil
}

// backups lists the kept snapshots, or with ?name= streams one: the file
// as etcd sent it, its SHA-256 appended, which the client checks.
func (s *Server) backups(w http.ResponseWriter, r *http.Request) error {
	names := r.URL.Query()["name"]
	if len(names) == 0 {
		snaps, err := s.cfg.Node.Backups()
		if err != nil {
			return nodeError("backups", err)
		}
		writeJSON(w, http.StatusOK, snaps)
		return nil
	}
	if len(names) > 1 || names[0] == "" {
		return errorf(http.StatusBadRequest, "name: give one snapshot name, as GET %s lists them", nodeapi.PathBackups)
	}
	f, snap, err := s.cfg.Node.OpenBackup(names[0])
	if errors.Is(err, fs.ErrNotExist) {
		return errorf(http.StatusNotFound, "no snapshot %q on this node", names[0])
	}
	if err != nil {
		return nodeError("backup", err)
	}
	defer f.Close()
	// A large snapshot takes longer than the server's write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(snap.Size, 10))
	w.Header().Set(nodeapi.HeaderSnapshotSHA256, snap.SHA256)
	w.WriteHeader(http.StatusOK)
	_, err = io.Copy(w, f)
	if err != nil {
		s.cfg.Log("node API: send snapshot %s: %v", snap.Name, err)
	}
	return nil
}

func (s *Server) takeBackup(w http.ResponseWriter, r *http.Request) error {
	var req struct{}
	if err := decodeBody(w, r, &req, true); err != nil {
		return err
	}
	snap, err := s.cfg.Node.Backup(r.Context())
	if err != nil {
		return nodeError("backup", err)
	}
	writeJSON(w, http.StatusOK, snap)
	return nil
}

func (s *Server) decommission(w http.ResponseWriter, r *http.Request) error {
	var req nodeapi.DecommissionRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if strings.TrimSpace(req.Node) == "" {
		return errorf(http.StatusBadRequest, "request body: node: required; name the node to decommission")
	}
	d, err := s.cfg.Node.Decommission(r.Context(), req)
	if err != nil {
		return nodeError("decommission", err)
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) recover(w http.ResponseWriter, r *http.Request) error {
	var req nodeapi.RecoverRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(req.Survivor) == "":
		return errorf(http.StatusBadRequest, "request body: survivor: required; name the node that survived")
	case strings.TrimSpace(req.Token) == "":
		return errorf(http.StatusBadRequest, "request body: token: required; the survivor's status gives its cluster and member IDs")
	}
	rec, err := s.cfg.Node.Recover(r.Context(), req)
	if err != nil {
		return nodeError("recover", err)
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

func (s *Server) restore(w http.ResponseWriter, r *http.Request) error {
	var req nodeapi.RestoreRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if strings.TrimSpace(req.Token) == "" || strings.TrimSpace(req.Step) == "" {
		return errorf(http.StatusBadRequest, "request body: token and step: required")
	}
	rec, err := s.cfg.Node.Restore(r.Context(), req)
	if err != nil {
		return nodeError("restore", err)
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

// restoreSnapshot takes a snapshot file as the body: it may be large, so
// the read deadline grows with it (one minute per 64 MiB, at least ten).
func (s *Server) restoreSnapshot(w http.ResponseWriter, r *http.Request) error {
	token := r.URL.Query().Get("token")
	if token == "" {
		return errorf(http.StatusBadRequest, "token: required")
	}
	if r.ContentLength > 0 {
		d := 10*time.Minute + time.Duration(r.ContentLength/(64<<20))*time.Minute
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(d))
		_ = rc.SetWriteDeadline(time.Now().Add(d + time.Minute))
	}
	rec, err := s.cfg.Node.ReceiveSnapshot(r.Context(), token, r.Body)
	if err != nil {
		return nodeError("restore snapshot", err)
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

func (s *Server) formation(w http.ResponseWriter, r *http.Request) error {
	f, err := s.cfg.Node.Formation(r.Context())
	if err != nil {
		return nodeError("formation", err)
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

func (s *Server) formWithout(w http.ResponseWriter, r *http.Request) error {
	var req nodeapi.FormationRequest
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	if len(req.Without) == 0 {
		return errorf(http.StatusBadRequest, "without: name at least one expected initial member")
	}
	f, err := s.cfg.Node.FormWithout(r.Context(), req.Without)
	if err != nil {
		return nodeError("form without", err)
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

func (s *Server) upgradeProgress(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, s.progress())
	return nil
}

// progress is the node's upgrade progress, an empty phase made explicit.
func (s *Server) progress() nodeapi.UpgradeProgress {
	p := s.cfg.Node.Upgrade()
	if p.Phase == "" {
		p.Phase = nodeapi.PhaseIdle
	}
	return p
}

// nodeError maps an error of a Node method to an answer.
func nodeError(op string, err error) error {
	switch {
	case errors.Is(err, ErrBusy), errors.Is(err, ErrRefused):
		return errorf(http.StatusConflict, "%s: %v", op, err)
	case errors.Is(err, ErrBadRequest):
		return errorf(http.StatusBadRequest, "%s: %v", op, err)
	}
	return errorf(http.StatusInternalServerError, "%s: %v", op, err)
}

// decodeBody decodes the request's JSON body into v strictly: unknown
// fields, wrong types, trailing data and other media types are errors that
// name the problem. optional allows an empty body.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return errorf(http.StatusUnsupportedMediaType, "request body: content type %q, want application/json", ct)
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) && optional {
			return nil
		}
		return bodyError(err)
	}
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		if err == nil {
			return errorf(http.StatusBadRequest, "request body: more than one JSON value")
		}
		return bodyError(err)
	}
	return nil
}

// bodyError names what is wrong with a request body.
func bodyError(err error) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		big *http.MaxBytesError
	)
	switch {
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, "request body: empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "request body: truncated JSON")
	case errors.As(err, &syn):
		return errorf(http.StatusBadRequest, "request body: invalid JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ) && typ.Field != "":
		return errorf(http.StatusBadRequest, "request body: field %q: want %v, got JSON %s", typ.Field, typ.Type, typ.Value)
	case errors.As(err, &typ):
		return errorf(http.StatusBadRequest, "request body: want a JSON object, got JSON %s", typ.Value)
	case errors.As(err, &big):
		return errorf(http.StatusRequestEntityTooLarge, "request body: larger than %d bytes", big.Limit)
	default:
		// encoding/json has no type for an unknown field; its message is
		// `json: unknown field "imag"`.
		return errorf(http.StatusBadRequest, "request body: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(nodeapi.ErrorBody{Error: "encode answer: " + err.Error()})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
