package metadata

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The IMDSv2 headers.
const (
	EC2TokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds"
	EC2TokenHeader    = "X-aws-ec2-metadata-token"
)

// EC2 serves the instance as EC2's instance metadata service does with
// http-tokens=required (IMDSv2 only): PUT /latest/api/token with a TTL of
// 1 to 21600 seconds gives a token, and every GET needs a live one (401
// without). It serves /latest/user-data (404 when there is none) and
// /latest/meta-data/{instance-id,local-hostname,tags/instance/Name}.
func EC2(in Instance) http.Handler { return &ec2{in: in, tokens: map[string]time.Time{}} }

// EC2V1Only is a broken IMDS: it has no token flow (the PUT is refused
// with 405, as an IMDSv1-only emulator does) and answers a plain GET.
// A node must never read its seed from it.
func EC2V1Only(in Instance) http.Handler { return &ec2{in: in, v1: true} }

type ec2 struct {
	in Instance
	v1 bool

	mu     sync.Mutex
	tokens map[string]time.Time // token -> expiry
}

func (s *ec2) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Forwarded-For") != "" {
		http.Error(w, "Forbidden", http.StatusForbidden)
		return
	}
	if r.URL.Path == "/latest/api/token" {
		s.token(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	if !s.v1 && !s.valid(r.Header.Get(EC2TokenHeader)) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	var body string
	switch r.URL.Path {
	case "/latest/user-data":
		if s.in.UserData == nil {
			http.NotFound(w, r)
			return
		}
		body = string(s.in.UserData)
	case "/latest/meta-data/instance-id":
		body = s.in.id("i-")
	case "/latest/meta-data/local-hostname":
		body = "ip-10-0-0-1.ec2.internal"
	case "/latest/meta-data/tags/instance/Name":
		if s.in.Name == "" {
			http.NotFound(w, r)
			return
		}
		body = s.in.Name
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(body))
}

// token answers PUT /latest/api/token.
func (s *ec2) token(w http.ResponseWriter, r *http.Request) {
	if s.v1 || r.Method != http.MethodPut {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(EC2TokenTTLHeader))
	if err != nil || ttl < 1 || ttl > 21600 {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	tok := hex.EncodeToString(b)
	s.mu.Lock()
	s.tokens[tok] = time.Now().Add(time.Duration(ttl) * time.Second)
	s.mu.Unlock()
	w.Header().Set(EC2TokenTTLHeader, strconv.Itoa(ttl))
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(tok))
}

func (s *ec2) valid(tok string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.tokens[tok]
	return ok && time.Now().Before(exp)
}
