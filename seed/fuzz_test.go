package seed

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
)

// FuzzParse: any bytes either parse or fail with an error, never a
// panic; a seed that parses marshals to YAML that parses to the same seed,
// and an error never repeats PEM text from the input.
func FuzzParse(f *testing.F) {
	f.Add([]byte("cluster: demo\n"))
	f.Add([]byte("cluster: demo\ndiscovery: {srv: etcd.example.internal, initialSize: 3}\n"))
	f.Add([]byte("cluster: demo\ndiscovery:\n  peers: [{name: n1, host: 10.0.0.1}]\nnetwork:\n  interfaces: [{name: eth0, addresses: [10.0.0.1/24]}]\n"))
	f.Add([]byte("cluster: demo\nupgrade: {registries: [r.example.com], tries: 2}\npki: {caCert: x}\n"))
	f.Add([]byte("name: |\n  -----BEGIN PRIVATE KEY-----\n  x\n"))
	f.Add([]byte("{\"cluster\": 1, \"etcd\": {\"clientPort\": \"x\"}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
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
		back, err := Parse(out)
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
		_, _, _ = FromCmdline(s)
		for _, a := range strings.Fields(WithoutSeed(s)) {
			if strings.HasPrefix(strings.TrimPrefix(a, `"`), CmdlineKey+"=") {
				t.Fatalf("WithoutSeed(%q) kept %q", s, a)
			}
		}
	})
}
