package metadata

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/etcdbox/etcdbox/seed"
)

const (
	openstackName = "OpenStack metadata service"
	// ConfigDriveName names the config drive as a source.
	ConfigDriveName = "OpenStack config drive"
	// ConfigDriveLabel is the filesystem label of an OpenStack config
	// drive (ISO9660 or vfat).
	ConfigDriveLabel = "config-2"
)

// OpenStack reads the user data from OpenStack's metadata service: GET
// /openstack/latest/user_data (404: no seed, when meta_data.json answers).
// The name is meta_data.json's name.
func (c *Client) OpenStack(ctx context.Context) (Result, error) {
	const path = "/openstack/latest/user_data"
	a, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return Result{}, err
	}
	var r Result
	switch a.status {
	case http.StatusOK:
		r.UserData = a.body
	case http.StatusNotFound:
	default:
		return Result{}, absent("GET %s: %d", path, a.status)
	}
	if m, err := c.do(ctx, http.MethodGet, "/openstack/latest/meta_data.json", nil); err == nil && m.status == http.StatusOK {
		if name, err := metaDataName(m.body); err == nil {
			r.Here, r.Name = true, name
		}
	}
	if r.UserData == nil && !r.Here {
		return Result{}, absent("GET %s: 404, and no meta_data.json", path)
	}
	r.Here = true
	return r, nil
}

// metaDataName is the name in an OpenStack meta_data.json.
func metaDataName(b []byte) (string, error) {
	var md struct {
		Name string `json:"name"`
		UUID string `json:"uuid"`
	}
	if err := json.Unmarshal(b, &md); err != nil {
		return "", fmt.Errorf("meta_data.json: %w", err)
	}
	if md.UUID == "" && md.Name == "" {
		return "", errors.New("meta_data.json names no instance")
	}
	return md.Name, nil
}

// ReadConfigDrive reads a mounted OpenStack config drive at dir: the user
// data in openstack/latest/user_data (none when the file is missing) and
// the name in openstack/latest/meta_data.json. The user data is read no
// further than one byte past seed.MaxSize.
func ReadConfigDrive(dir string) (Result, error) {
	latest := filepath.Join(dir, "openstack", "latest")
	r := Result{Source: ConfigDriveName, ID: "openstack-drive", Here: true}
	b, err := seed.ReadFile(filepath.Join(latest, "user_data"))
	switch {
	case err == nil:
		r.UserData = b
	case !errors.Is(err, os.ErrNotExist):
		return Result{}, fmt.Errorf("config drive: %w", err)
	}
	f, err := os.Open(filepath.Join(latest, "meta_data.json"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return r, nil
		}
		return Result{}, fmt.Errorf("config drive: %w", err)
	}
	defer f.Close()
	md, err := io.ReadAll(io.LimitReader(f, maxBody))
	if err != nil {
		return Result{}, fmt.Errorf("config drive: %w", err)
	}
	if r.Name, err = metaDataName(md); err != nil {
		return Result{}, fmt.Errorf("config drive: %w", err)
	}
	return r, nil
}

func trimSpace(b []byte) []byte { return bytes.TrimSpace(b) }
