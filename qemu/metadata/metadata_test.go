package metadata

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var inst = Instance{Name: "etcd-1", UserData: []byte("cluster: demo\n")}

// call sends one request to h and returns the status, headers and body.
func call(t *testing.T, h http.Handler, method, target string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	b, err := io.ReadAll(w.Result().Body)
	require.NoError(t, err)
	return w.Code, w.Result().Header, string(b)
}

func TestEC2(t *testing.T) {
	h := EC2(inst)
	code, _, _ := call(t, h, "GET", "/latest/user-data", nil)
	assert.Equal(t, http.StatusUnauthorized, code, "IMDSv2: a GET without a token")
	code, _, _ = call(t, h, "GET", "/latest/user-data", map[string]string{EC2TokenHeader: "made-up"})
	assert.Equal(t, http.StatusUnauthorized, code, "a token it did not give")
	code, _, _ = call(t, h, "PUT", "/latest/api/token", nil)
	assert.Equal(t, http.StatusBadRequest, code, "a PUT without a TTL")
	code, _, _ = call(t, h, "PUT", "/latest/api/token", map[string]string{EC2TokenTTLHeader: "21601"})
	assert.Equal(t, http.StatusBadRequest, code, "a TTL over 6 hours")
	code, _, _ = call(t, h, "PUT", "/latest/api/token", map[string]string{EC2TokenTTLHeader: "60", "X-Forwarded-For": "10.0.0.9"})
	assert.Equal(t, http.StatusForbidden, code, "a proxied PUT")

	code, hdr, tok := call(t, h, "PUT", "/latest/api/token", map[string]string{EC2TokenTTLHeader: "60"})
	require.Equal(t, http.StatusOK, code)
	assert.Equal(t, "60", hdr.Get(EC2TokenTTLHeader))
	with := map[string]string{EC2TokenHeader: tok}
	code, _, body := call(t, h, "GET", "/latest/user-data", with)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, string(inst.UserData), body)
	_, _, body = call(t, h, "GET", "/latest/meta-data/tags/instance/Name", with)
	assert.Equal(t, "etcd-1", body)
	_, _, body = call(t, h, "GET", "/latest/meta-data/instance-id", with)
	assert.Equal(t, "i-etcd-1", body)

	code, _, _ = call(t, EC2(Instance{}), "GET", "/latest/user-data", nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	h = EC2(Instance{})
	_, _, tok = call(t, h, "PUT", "/latest/api/token", map[string]string{EC2TokenTTLHeader: "60"})
	code, _, _ = call(t, h, "GET", "/latest/user-data", map[string]string{EC2TokenHeader: tok})
	assert.Equal(t, http.StatusNotFound, code, "no user data")

	// The broken one: no token flow, and a plain GET works.
	v1 := EC2V1Only(inst)
	code, _, _ = call(t, v1, "PUT", "/latest/api/token", map[string]string{EC2TokenTTLHeader: "60"})
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	code, _, body = call(t, v1, "GET", "/latest/user-data", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, string(inst.UserData), body)
}

func TestGCE(t *testing.T) {
	h := GCE(inst)
	const ud = "/computeMetadata/v1/instance/attributes/user-data"
	code, hdr, _ := call(t, h, "GET", ud, nil)
	assert.Equal(t, http.StatusForbidden, code, "no Metadata-Flavor")
	assert.Equal(t, "Google", hdr.Get(GCEFlavorHeader), "on a refusal too")
	google := map[string]string{GCEFlavorHeader: "Google"}
	code, _, _ = call(t, h, "GET", ud, map[string]string{GCEFlavorHeader: "Google", "X-Forwarded-For": "10.0.0.9"})
	assert.Equal(t, http.StatusForbidden, code, "a proxied request")
	code, hdr, body := call(t, h, "GET", ud, google)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "Google", hdr.Get(GCEFlavorHeader))
	assert.Equal(t, string(inst.UserData), body)
	_, _, body = call(t, h, "GET", "/computeMetadata/v1/instance/name", google)
	assert.Equal(t, "etcd-1", body)
	code, _, _ = call(t, GCE(Instance{}), "GET", ud, google)
	assert.Equal(t, http.StatusNotFound, code)

	code, hdr, body = call(t, GCENoFlavor(inst), "GET", ud, nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Empty(t, hdr.Get(GCEFlavorHeader))
	assert.Equal(t, string(inst.UserData), body)
}

func TestAzure(t *testing.T) {
	h := Azure(inst)
	const ud = "/metadata/instance/compute/userData?api-version=2021-01-01&format=text"
	code, _, body := call(t, h, "GET", ud, nil)
	assert.Equal(t, http.StatusBadRequest, code, "no Metadata: true")
	assert.Contains(t, body, "Required metadata header not specified")
	md := map[string]string{"Metadata": "true"}
	code, _, _ = call(t, h, "GET", "/metadata/instance/compute/userData", md)
	assert.Equal(t, http.StatusBadRequest, code, "no api-version")
	code, _, _ = call(t, h, "GET", ud, map[string]string{"Metadata": "true", "X-Forwarded-For": "10.0.0.9"})
	assert.Equal(t, http.StatusBadRequest, code, "a proxied request")
	code, _, body = call(t, h, "GET", ud, md)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, base64.StdEncoding.EncodeToString(inst.UserData), body)
	_, _, body = call(t, h, "GET", "/metadata/instance/compute/name?api-version=2021-01-01&format=text", md)
	assert.Equal(t, "etcd-1", body)
	_, _, body = call(t, h, "GET", "/metadata/instance/compute/name?api-version=2021-01-01", md)
	assert.JSONEq(t, `"etcd-1"`, body)
	code, _, body = call(t, Azure(Instance{}), "GET", ud, md)
	assert.Equal(t, http.StatusOK, code)
	assert.Empty(t, body, "no user data")
}

func TestOpenStack(t *testing.T) {
	h := OpenStack(inst)
	code, _, body := call(t, h, "GET", "/openstack/latest/user_data", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, string(inst.UserData), body)
	_, _, body = call(t, h, "GET", "/openstack/latest/meta_data.json", nil)
	var md map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &md))
	assert.Equal(t, "etcd-1", md["name"])
	code, _, _ = call(t, OpenStack(Instance{}), "GET", "/openstack/latest/user_data", nil)
	assert.Equal(t, http.StatusNotFound, code)

	dir := t.TempDir()
	require.NoError(t, WriteConfigDrive(dir, inst))
	b, err := os.ReadFile(filepath.Join(dir, "openstack", "latest", "user_data"))
	require.NoError(t, err)
	assert.Equal(t, inst.UserData, b)
	dir = t.TempDir()
	require.NoError(t, WriteConfigDrive(dir, Instance{Name: "x"}))
	_, err = os.Stat(filepath.Join(dir, "openstack", "latest", "user_data"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
