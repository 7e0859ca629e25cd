package metadata

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
)

// Azure serves the instance as Azure's IMDS does: a request without the
// header Metadata: true, without an api-version, or with X-Forwarded-For
// is refused with 400 and a JSON error. It serves
// /metadata/instance/compute/userData (base64; empty when there is none)
// and /metadata/instance/compute/name, as text with format=text and as a
// JSON string otherwise.
func Azure(in Instance) http.Handler { return azure{in} }

type azure struct{ in Instance }

func (s azure) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	q := r.URL.Query()
	switch {
	case r.Header.Get("Metadata") != "true":
		fail(http.StatusBadRequest, "Bad request. Required metadata header not specified")
		return
	case r.Header.Get("X-Forwarded-For") != "":
		fail(http.StatusBadRequest, "Bad request. Request contains X-Forwarded-For header")
		return
	case q.Get("api-version") == "":
		fail(http.StatusBadRequest, "Bad request. api-version was not specified in the request")
		return
	case r.Method != http.MethodGet:
		fail(http.StatusMethodNotAllowed, "Method not allowed")
		return
	}
	var body string
	switch r.URL.Path {
	case "/metadata/instance/compute/userData":
		body = base64.StdEncoding.EncodeToString(s.in.UserData)
	case "/metadata/instance/compute/name":
		body = s.in.Name
	case "/metadata/instance/compute/vmId":
		body = s.in.id("")
	default:
		fail(http.StatusNotFound, "Not found")
		return
	}
	if q.Get("format") == "text" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(body))
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(body)
}
