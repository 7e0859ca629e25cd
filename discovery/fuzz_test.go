package discovery

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseSeed: any bytes either parse or fail with an error, never a
// panic; a seed that parses marshals to YAML that parses to the same seed,
// and an error never repeats PEM text from the input.
func FuzzParseSeed(f *testing.F) {
	f.Add([]byte("cluster: demo\n"))
	f.Add([]byte("cluster: demo\ndiscovery: {srv: etcd.example.internal, initialSize: 3}\n"))
	f.Add([]byte("cluster: demo\ndiscovery:\n  peers: [{name: n1, host: 10.0.0.1}]\nnetwork:\n  interfaces: [{name: eth0, addresses: [10.0.0.1/24]}]\n"))
	f.Add([]byte("cluster: demo\nupgrade: {registries: [r.example.com], tries: 2}\npki: {caCert: x}\n"))
	f.Add([]byte("name: |\n  -----BEGIN PRIVATE KEY-----\n  x\n"))
	f.Add([]byte("{\"cluster\": 1, \"etcd\": {\"clientPort\": \"x\"}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSeed(data)
		if err != nil {
			if strings.Contains(err.Error(), "-----BEGIN") {
				t.Fatalf("the error repeats PEM text: %v", err)
			}
			return
		}
		out, err := s.Marshal()
		if err != nil {
			t.Fatalf("a parsed seed does not marshal: %v", err)
		}
		back, err := ParseSeed(out)
		if err != nil {
			t.Fatalf("the marshalled seed does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(s, back) {
			t.Fatalf("round trip changed the seed:\n%+v\n%+v", s, back)
		}
	})
}

// FuzzCmdline: the kernel command line parsers never panic, and
// WithoutSeed leaves no etcdbox.seed= argument behind.
func FuzzCmdline(f *testing.F) {
	f.Add("console=ttyS0 etcdbox.slot=a panic=10")
	f.Add("etcdbox.seed=" + base64.StdEncoding.EncodeToString([]byte("cluster: x\n")) + " quiet")
	f.Add(`a="b c" "etcdbox.seed=Zm9v" d`)
	f.Add("etcdbox.seed=https://x/y")
	f.Fuzz(func(t *testing.T, s string) {
		_ = ParseCmdline(s)
		_, _, _ = SeedFromCmdline(s)
		for _, a := range strings.Fields(WithoutSeed(s)) {
			if strings.HasPrefix(strings.TrimPrefix(a, `"`), CmdlineSeedKey+"=") {
				t.Fatalf("WithoutSeed(%q) kept %q", s, a)
			}
		}
	})
}

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
			if !ValidName(p.Name) || p.Host != p.Name+"."+domain || p.PeerPort == 0 || p.ClientPort == 0 {
				t.Fatalf("bad peer from SRV: %+v", p)
			}
		}
	})
}
