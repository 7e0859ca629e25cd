package member

import (
	"bytes"
	"testing"
)

// FuzzRemovedEntry: only etcd's own JSON entry says the member was
// removed. Any line either is one or is not, never a panic; a line that
// is not one JSON object (after etcd's prefix) never is; and the
// matcher's verdict does not change when the line is embedded in other
// text, as a forged server name would be.
func FuzzRemovedEntry(f *testing.F) {
	f.Add([]byte(`{"level":"error","ts":"2026-12-01T00:00:00Z","caller":"etcdserver/server.go:1","msg":"server error","error":"the member has been permanently removed from the cluster"}`))
	f.Add([]byte(`etcd: {"level":"warn","ts":1,"caller":"embed/config_logging.go:1","msg":"rejected connection","server-name":"the member has been permanently removed from the cluster"}`))
	f.Add([]byte("the member has been permanently removed from the cluster"))
	f.Fuzz(func(t *testing.T, line []byte) {
		removed := IsRemovedEntry(line)
		trimmed := bytes.TrimSpace(bytes.TrimPrefix(line, []byte(SupervisedPrefix)))
		if removed && (len(trimmed) == 0 || trimmed[0] != '{') {
			t.Fatalf("%q is not a JSON object, but matched", line)
		}
		if IsRemovedEntry(append([]byte("x "), line...)) {
			t.Fatalf("%q matched after other text", line)
		}
	})
}
