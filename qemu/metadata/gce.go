package metadata

import (
	"net/http"
	"strings"
)

// GCEFlavorHeader is the header both ways of GCE's metadata protocol:
// every request carries it, and every answer.
const GCEFlavorHeader = "Metadata-Flavor"

// GCE serves the instance as GCE's metadata server does: a request
// without Metadata-Flavor: Google is refused with 403, and every answer
// carries that header. It serves /computeMetadata/v1/instance/{name,id,
// hostname} and instance/attributes/user-data (404 when there is none).
func GCE(in Instance) http.Handler { return gce{in: in} }

// GCENoFlavor is a broken GCE metadata server: it asks for no header and
// sends none back, as a service that is not GCE's (or a proxy that strips
// the header) would. A node must never read its seed from it.
func GCENoFlavor(in Instance) http.Handler { return gce{in: in, broken: true} }

type gce struct {
	in     Instance
	broken bool
}

func (s gce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.broken {
		w.Header().Set(GCEFlavorHeader, "Google")
		w.Header().Set("Server", "Metadata Server for VM")
		if r.Header.Get(GCEFlavorHeader) != "Google" || r.Header.Get("X-Forwarded-For") != "" {
			http.Error(w, "Missing required header: \"Metadata-Flavor\"", http.StatusForbidden)
			return
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	const base = "/computeMetadata/v1/instance/"
	var body string
	switch strings.TrimPrefix(r.URL.Path, base) {
	case "name":
		body = s.in.Name
	case "id":
		body = s.in.id("")
	case "hostname":
		body = s.in.Name + ".c.project.internal"
	case "attributes/user-data":
		if s.in.UserData == nil {
			http.NotFound(w, r)
			return
		}
		body = string(s.in.UserData)
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/text")
	_, _ = w.Write([]byte(body))
}
