package metadata

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
)

// ConfigDriveLabel is the filesystem label of an OpenStack config drive
// (ISO9660 or vfat).
const ConfigDriveLabel = "config-2"

// OpenStack serves the instance as OpenStack's metadata service does:
// /openstack/latest/user_data (404 when there is none) and
// /openstack/latest/meta_data.json. It asks for no header.
func OpenStack(in Instance) http.Handler { return openstack{in} }

type openstack struct{ in Instance }

func (s openstack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "/openstack/latest/user_data":
		if s.in.UserData == nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
		_, _ = w.Write(s.in.UserData)
	case "/openstack/latest/meta_data.json":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.in.metaDataJSON())
	default:
		http.NotFound(w, r)
	}
}

// metaDataJSON is OpenStack's meta_data.json for the instance.
func (in Instance) metaDataJSON() []byte {
	b, _ := json.Marshal(map[string]any{
		"uuid":              in.id("6f8a1c2e-0000-4000-8000-"),
		"name":              in.Name,
		"hostname":          in.Name + ".novalocal",
		"availability_zone": "nova",
		"launch_index":      0,
		"meta":              map[string]string{},
	})
	return b
}

// WriteConfigDrive writes the tree of an OpenStack config drive for the
// instance under dir: openstack/latest/meta_data.json and, when there is
// user data, openstack/latest/user_data. Put it on an ISO9660 or vfat
// volume labelled ConfigDriveLabel.
func WriteConfigDrive(dir string, in Instance) error {
	latest := filepath.Join(dir, "openstack", "latest")
	if err := os.MkdirAll(latest, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(latest, "meta_data.json"), in.metaDataJSON(), 0o644); err != nil {
		return err
	}
	if in.UserData == nil {
		return nil
	}
	return os.WriteFile(filepath.Join(latest, "user_data"), in.UserData, 0o644)
}
