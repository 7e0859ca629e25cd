package server

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/etcdbox/etcdbox/nodeapi"
)

// FuzzDecodeBody: any request body either decodes into the node API's
// request types or is refused with a client error (4xx), never a panic
// or a server error.
func FuzzDecodeBody(f *testing.F) {
	f.Add([]byte(`{"image":"10.88.0.1:5000/etcdbox@sha256:00"}`), "application/json")
	f.Add([]byte(`{"node":"n1","reason":"retired"}`), "")
	f.Add([]byte(`{"image":1} {}`), "application/json; charset=utf-8")
	f.Add([]byte(`{"unknown":true}`), "text/plain")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		for _, v := range []any{&nodeapi.UpgradeRequest{}, &nodeapi.DecommissionRequest{}} {
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			if contentType != "" {
				r.Header.Set("Content-Type", contentType)
			}
			w := httptest.NewRecorder()
			err := decodeBody(w, r, v, false)
			if err == nil {
				continue
			}
			var he *httpError
			if !errors.As(err, &he) || he.code < 400 || he.code >= 500 {
				t.Fatalf("body %q: %v is not a client error", body, err)
			}
		}
	})
}
