package vnet

import (
	"encoding/json"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResolve(t *testing.T) {
	r, err := resolve(Config{})
	require.NoError(t, err)
	assert.Equal(t, "10.88.0.0/24", r.prefix.String())
	assert.Equal(t, "10.88.0.1", r.gateway.String())
	assert.Equal(t, DefaultDomain, r.Domain)
	assert.Equal(t, DefaultLeaseTime, r.LeaseTime)

	r, err = resolve(Config{Subnet: "192.168.7.9/28", Domain: "Demo.Internal.", Hosts: []Host{{Name: "N1", MAC: mac1, IP: netip.MustParseAddr("192.168.7.14")}}})
	require.NoError(t, err)
	assert.Equal(t, "192.168.7.0/28", r.prefix.String())
	assert.Equal(t, "192.168.7.1", r.gateway.String())
	assert.Equal(t, "demo.internal", r.Domain)
	assert.Equal(t, "n1", r.Hosts[0].Name)

	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the error, all of them
	}{
		{"bad subnet", Config{Subnet: "10.88.0.0"}, []string{`subnet "10.88.0.0"`}},
		{"ipv6 subnet", Config{Subnet: "fd00::/64"}, []string{"want an IPv4 prefix"}},
		{"tiny subnet", Config{Subnet: "10.0.0.0/31"}, []string{"want an IPv4 prefix"}},
		{"bad domain and srv name", Config{Domain: "a_b.internal", SRVName: "-x"}, []string{`domain "a_b.internal"`, `srv name "-x"`}},
		{"short lease", Config{LeaseTime: 1}, []string{"shorter than a minute"}},
		{"long dir", Config{Dir: "/" + strings.Repeat("d", 120)}, []string{"longer than 107 bytes"}},
		{"bad hosts", Config{Hosts: []Host{
			{Name: "n1", MAC: mac1, IP: ip1},
			{Name: "n_2", MAC: mac2, IP: ip2},
			{Name: "n3", MAC: mac1, IP: ip3},
			{Name: "n4", MAC: mac3, IP: ip1},
			{Name: "n5", MAC: net.HardwareAddr{1, 0, 0, 0, 0, 5}, IP: netip.MustParseAddr("10.88.0.5")},
			{Name: "n6", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 6}, IP: netip.MustParseAddr("10.88.1.6")},
			{Name: "n7", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 7}, IP: gw},
			{Name: "n8", MAC: net.HardwareAddr{2, 0, 0, 0, 0, 8}, IP: netip.MustParseAddr("10.88.0.255")},
		}}, []string{
			`hosts[1]: host name "n_2"`,
			"hosts[2]: host n3: mac 52:54:00:00:00:01: conflicts with another host n1",
			"hosts[3]: host n4: ip 10.88.0.11: conflicts with another host n1",
			"hosts[4]: host n5: mac",
			"hosts[5]: host n6: ip 10.88.1.6: not in subnet",
			"hosts[6]: host n7: ip 10.88.0.1: the gateway's address",
			"hosts[7]: host n8: ip 10.88.0.255: the subnet's network or broadcast address",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := resolve(tt.cfg)
			require.Error(t, err)
			for _, w := range tt.want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}

func TestHostJSON(t *testing.T) {
	h := Host{Name: "n1", MAC: mac1, IP: ip1, SkipSRV: true}
	b, err := json.Marshal(h)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"n1","mac":"52:54:00:00:00:01","ip":"10.88.0.11","skipSRV":true}`, string(b))
	var back Host
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, h, back)
	assert.Error(t, json.Unmarshal([]byte(`{"name":"n1","mac":"nope"}`), &back))
}

func TestQEMUArgs(t *testing.T) {
	args, err := QEMUArgs("/tmp/c,d/net.sock", "vnet0", mac1)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"-netdev", "stream,id=vnet0,server=off,addr.type=unix,addr.path=/tmp/c,,d/net.sock",
		"-device", "virtio-net-pci,netdev=vnet0,mac=52:54:00:00:00:01,romfile=",
	}, args)
	_, err = QEMUArgs("/"+strings.Repeat("s", 110), "vnet0", mac1)
	assert.ErrorContains(t, err, "longer than")
}
