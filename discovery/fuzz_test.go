package discovery

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/etcdbox/etcdbox/seed"
)

// FuzzSRV feeds SRV answers built from fuzz input (targets, ports,
// addresses) through SRV: it never panics, and any peer set it returns
// holds only names under the domain with non-zero ports, at most
// MaxSRVRecords of them.
func FuzzSRV(f *testing.F) {
	f.Add("n1.example.internal.,2380,10.0.0.1;n2.example.internal.,2380,10.0.0.2;n3.example.internal.,2380,10.0.0.3", "n1.example.internal.,2379,")
	f.Add("n1.example.internal.,0,0.0.0.0;evil.example.com.,2380,224.0.0.1", "")
	f.Add("n1.example.internal.,2380,10.0.0.1;n1.example.internal.,2381,10.0.0.1", "n1.example.internal.,2380,")
	f.Fuzz(func(t *testing.T, servers, clients string) {
		const domain = "example.internal"
		r := &fakeResolver{srv: map[string][]*net.SRV{}, hosts: map[string][]string{}}
		add := func(name, spec string) {
			for i, rec := range strings.Split(spec, ";") {
				if i > 2*MaxSRVRecords {
					break
				}
				parts := strings.SplitN(rec, ",", 3)
				if len(parts) < 2 {
					continue
				}
				var port uint16
				fmt.Sscan(parts[1], &port)
				r.srv[name] = append(r.srv[name], &net.SRV{Target: parts[0], Port: port})
				if len(parts) == 3 && parts[2] != "" {
					r.hosts[parts[0]] = append(r.hosts[parts[0]], parts[2])
				}
			}
		}
		add(srvServerName, servers)
		add(srvClientName, clients)
		if _, err := SRV(context.Background(), fakeCluster(3), domain, ""); err != nil {
			t.Fatalf("the fake resolver's own cluster: %v", err)
		}
		set, err := SRV(context.Background(), r, domain, "")
		if err != nil {
			return
		}
		if len(set) > MaxSRVRecords {
			t.Fatalf("%d peers, more than %d", len(set), MaxSRVRecords)
		}
		for _, p := range set {
			if !seed.ValidName(p.Name) || p.Host != p.Name+"."+domain || p.PeerPort == 0 || p.ClientPort == 0 {
				t.Fatalf("bad peer from SRV: %+v", p)
			}
		}
	})
}
