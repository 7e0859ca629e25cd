package discovery

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/seed"
)

// fakeResolver answers from maps, without a DNS server: it can return
// answers that would not fit in a UDP message. A name not in srv or hosts
// is NXDOMAIN.
type fakeResolver struct {
	srv   map[string][]*net.SRV // "_service._proto.name." -> records
	hosts map[string][]string   // "target." -> addresses
}

func (f *fakeResolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	key := "_" + service + "._" + proto + "." + name
	recs, ok := f.srv[key]
	if !ok {
		return "", nil, &net.DNSError{Err: "no such host", Name: key, IsNotFound: true}
	}
	return key, recs, nil
}

func (f *fakeResolver) LookupHost(_ context.Context, host string) ([]string, error) {
	addrs, ok := f.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

// fakeCluster is n nodes n1..nN under example.internal, peer port 2380,
// client records on 2379 and one IPv4 address each.
func fakeCluster(n int) *fakeResolver {
	f := &fakeResolver{srv: map[string][]*net.SRV{}, hosts: map[string][]string{}}
	for i := 1; i <= n; i++ {
		target := fmt.Sprintf("n%d.example.internal.", i)
		f.srv[srvServerName] = append(f.srv[srvServerName], &net.SRV{Target: target, Port: 2380})
		f.srv[srvClientName] = append(f.srv[srvClientName], &net.SRV{Target: target, Port: 2379})
		f.hosts[target] = []string{fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)}
	}
	return f
}

func TestSRVFakeResolver(t *testing.T) {
	tests := []struct {
		name   string
		nodes  int
		edit   func(f *fakeResolver)
		domain string   // default example.internal
		svc    string   // SRV service name
		want   []string // names of the peers; nil: an error
		errs   []string // substrings of the error
	}{
		{name: "three", nodes: 3, want: []string{"n1", "n2", "n3"}},
		{name: "as many records as accepted", nodes: MaxSRVRecords, want: fakeNames(MaxSRVRecords)},
		{
			name: "too many server records", nodes: MaxSRVRecords + 1,
			errs: []string{"lookup _etcd-server-ssl._tcp.example.internal: 65 SRV records, more than the 64 accepted"},
		},
		{
			name: "too many client records", nodes: 3,
			edit: func(f *fakeResolver) {
				for range MaxSRVRecords {
					f.srv[srvClientName] = append(f.srv[srvClientName], &net.SRV{Target: "n1.example.internal.", Port: 2379})
				}
			},
			errs: []string{"lookup _etcd-client-ssl._tcp.example.internal: 67 SRV records, more than the 64 accepted"},
		},
		{
			name: "client record with port 0", nodes: 3,
			edit: func(f *fakeResolver) { f.srv[srvClientName][1].Port = 0 },
			errs: []string{"_etcd-client-ssl._tcp.example.internal: SRV target n2.example.internal has port 0"},
		},
		{
			name: "client records disagree", nodes: 3,
			edit: func(f *fakeResolver) {
				f.srv[srvClientName] = append(f.srv[srvClientName], &net.SRV{Target: "N3.example.internal.", Port: 2479})
			},
			errs: []string{"_etcd-client-ssl._tcp.example.internal: n3.example.internal is listed twice (ports 2379 and 2479)"},
		},
		{
			name: "client port is the peer port", nodes: 3,
			edit: func(f *fakeResolver) { f.srv[srvClientName][0].Port = 2380 },
			errs: []string{"n1.example.internal has client port 2380, the same as its peer port"},
		},
		{
			name: "default client port is the peer port", nodes: 3,
			edit: func(f *fakeResolver) {
				delete(f.srv, srvClientName)
				f.srv[srvServerName][2].Port = uint16(seed.DefaultClientPort)
			},
			errs: []string{"n3.example.internal has client port 2379, the same as its peer port"},
		},
		{
			name: "client record for an unknown target is ignored", nodes: 2,
			edit: func(f *fakeResolver) {
				f.srv[srvClientName] = append(f.srv[srvClientName], &net.SRV{Target: "elsewhere.example.", Port: 1})
			},
			want: []string{"n1", "n2"},
		},
		{
			name: "unspecified address", nodes: 3,
			edit: func(f *fakeResolver) { f.hosts["n2.example.internal."] = []string{"0.0.0.0"} },
			errs: []string{"SRV target n2.example.internal resolves to 0.0.0.0, which is not a host's address"},
		},
		{
			name: "multicast address", nodes: 3,
			edit: func(f *fakeResolver) { f.hosts["n3.example.internal."] = []string{"10.0.0.4", "ff02::1"} },
			errs: []string{"SRV target n3.example.internal resolves to ff02::1, which is not a host's address"},
		},
		{
			name: "target named like the admin certificate", nodes: 2,
			edit: func(f *fakeResolver) {
				f.srv[srvServerName] = append(f.srv[srvServerName], &net.SRV{Target: "etcdbox-admin.example.internal.", Port: 2380})
				f.hosts["etcdbox-admin.example.internal."] = []string{"10.0.0.9"}
			},
			errs: []string{`SRV target etcdbox-admin.example.internal: "etcdbox-admin" is not a valid node name`},
		},
		{
			name: "server record with port 0", nodes: 2,
			edit: func(f *fakeResolver) { f.srv[srvServerName][0].Port = 0 },
			errs: []string{"SRV target n1.example.internal has port 0"},
		},
		{name: "invalid domain", nodes: 1, domain: "exa mple..internal", errs: []string{`SRV domain "exa mple..internal" is not a valid domain name`}},
		{name: "invalid service name", nodes: 1, svc: "blue.green", errs: []string{`SRV service name "blue.green" is not a valid DNS label`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fakeCluster(tt.nodes)
			if tt.edit != nil {
				tt.edit(f)
			}
			domain := tt.domain
			if domain == "" {
				domain = "example.internal"
			}
			got, err := SRV(t.Context(), f, domain, tt.svc)
			if tt.want == nil {
				require.Error(t, err, "SRV = %v, want an error", got.Names())
				assert.Nil(t, got)
				for _, e := range tt.errs {
					assert.Contains(t, err.Error(), e)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Names())
		})
	}
}

func fakeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	return names
}

// TestSRVPartialAnswer is issue 10: SRV lists n1 alone while the seed asks
// for three initial members. The answer is valid (a node with data or a
// running cluster needs no more), but it names no initial members.
func TestSRVPartialAnswer(t *testing.T) {
	got, err := SRV(t.Context(), fakeCluster(1), "example.internal", "")
	require.NoError(t, err)
	assert.Equal(t, []string{"n1"}, got.Names())

	initial, err := got.Initial(3)
	require.Error(t, err, "Initial(3) = %v, want an error", initial.Names())
	assert.Nil(t, initial)
	var ie *IncompleteError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, []string{"n2", "n3"}, ie.Missing)
	assert.Equal(t, "2 of 3 expected initial members missing (listed: n1); by their numbering the missing are n2, n3", err.Error())
}
