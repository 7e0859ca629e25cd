package nodeapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/seed"
)

func TestDefaultPortIsTheSeeds(t *testing.T) {
	assert.Equal(t, seed.DefaultAPIPort, DefaultPort)
}

func TestCheckImageRef(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, tc := range []struct {
		name, ref string
		wantErr   string // "" means valid
	}{
		{"registry and digest", "registry.example/etcdbox@sha256:" + hex, ""},
		{"registry port", "10.88.0.1:5000/etcdbox@sha256:" + hex, ""},
		{"tag and digest", "localhost:5000/etcdbox:v2@sha256:" + hex, ""},
		{"nested repository", "ghcr.io/org/etcdbox/node@sha256:" + hex, ""},
		{"empty", "", "image: required"},
		{"tag only", "registry.example/etcdbox:v2", `image "registry.example/etcdbox:v2": no digest; pin it as registry.example/etcdbox:v2@sha256:<64 hex digits>`},
		{"sha512", "registry.example/etcdbox@sha512:" + hex + hex, `digest "sha512:`},
		{"short digest", "registry.example/etcdbox@sha256:abc", "invalid checksum digest length"},
		{"upper-case hex", "registry.example/etcdbox@sha256:" + strings.ToUpper(hex), "invalid checksum digest format"},
		{"no registry", "etcdbox@sha256:" + hex, "registry to be explicitly defined"},
		{"upper-case repository", "registry.example/EtcdBox@sha256:" + hex, "repository can only contain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckImageRef(tc.ref)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in, want, wantErr string
	}{
		{in: "https://127.0.0.1:4002", want: "https://127.0.0.1:4002"},
		{in: "https://127.0.0.1:4002/", want: "https://127.0.0.1:4002"},
		{in: "127.0.0.1:4002", want: "https://127.0.0.1:4002"},
		{in: "n1.etcdbox.internal", want: "https://n1.etcdbox.internal:9379"},
		{in: "https://[::1]:4002", want: "https://[::1]:4002"},
		{in: "http://127.0.0.1:4002", wantErr: `scheme "http", want https`},
		{in: "https://127.0.0.1:4002/v1/status", wantErr: "want only https://host:port"},
		{in: "https://127.0.0.1:4002?x=1", wantErr: "want only https://host:port"},
		{in: "https://:4002", wantErr: "no host"},
		{in: "https://127.0.0.1:99999", wantErr: `bad port "99999"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseEndpoint(tc.in)
			if tc.wantErr != "" {
				assert.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestStatusWireFormat(t *testing.T) {
	st := Status{
		Name: "n1", Slot: "a", Blessed: true,
		Slots:      []Slot{{Name: "a", Generation: 1, State: SlotBlessed}, {Name: "b", Generation: 2, State: SlotTrying, TriesLeft: 2}},
		Member:     Member{ID: "8e9e05c52164694d", Role: RoleLearner},
		CertExpiry: time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC),
		Uptime:     90*time.Minute + 1400*time.Millisecond,
	}
	b, err := json.Marshal(st)
	require.NoError(t, err)
	var wire map[string]any
	require.NoError(t, json.Unmarshal(b, &wire))
	assert.Equal(t, "1h30m1s", wire["uptime"], "uptime is a duration string in whole seconds")
	assert.Equal(t, "2031-01-02T03:04:05Z", wire["certExpiry"])
	assert.Equal(t, "learner", wire["member"].(map[string]any)["role"])
	assert.Equal(t, map[string]any{"name": "b", "generation": 2.0, "state": "trying", "triesLeft": 2.0}, wire["slots"].([]any)[1])

	var back Status
	require.NoError(t, json.Unmarshal(b, &back))
	st.Uptime = 90*time.Minute + time.Second
	assert.Equal(t, st, back)

	assert.ErrorContains(t, json.Unmarshal([]byte(`{"uptime": "soon"}`), &back), "uptime")
	// A newer node may add fields; an older client ignores them.
	require.NoError(t, json.Unmarshal([]byte(`{"name": "n2", "newField": 1}`), &back))
	assert.Equal(t, "n2", back.Name)
}

func TestNewClientNamesMissingFiles(t *testing.T) {
	_, err := NewClient("https://127.0.0.1:1", t.TempDir())
	assert.ErrorContains(t, err, "load admin certificate")
	assert.ErrorContains(t, err, "admin.crt")
}

func TestErrorMessage(t *testing.T) {
	err := &Error{StatusCode: 400, Message: `request body: unknown field "imag"`}
	assert.Equal(t, `400 Bad Request: request body: unknown field "imag"`, err.Error())
}

// TestStorageLow: DATA is low when it has less free than the database may
// still grow before its quota plus WALRoom; unknown sizes are never low.
func TestStorageLow(t *testing.T) {
	const mib = 1 << 20
	s := Storage{DataBytes: 2048 * mib, DataFree: 617 * mib, Quota: 589 * mib, DBSize: 100 * mib}
	grow, low := s.Low()
	assert.Equal(t, int64(489*mib), grow)
	assert.False(t, low, "489 MiB to grow and 128 MiB for the WAL: exactly 617 MiB free")
	s.DataFree--
	_, low = s.Low()
	assert.True(t, low)
	// A database past its quota (a quota lowered) has nothing left to grow.
	grow, low = Storage{DataBytes: 2048 * mib, DataFree: 200 * mib, Quota: 100 * mib, DBSize: 150 * mib}.Low()
	assert.Equal(t, int64(0), grow)
	assert.False(t, low)
	for _, unknown := range []Storage{{}, {DataBytes: 1, DataFree: 0, Quota: 1}, {DataFree: 0, Quota: 10, DBSize: 1}, {DataBytes: 10, DBSize: 1}} {
		_, low := unknown.Low()
		assert.False(t, low, "%+v", unknown)
	}
}
