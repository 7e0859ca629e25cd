package main

import (
	"strings"
	"testing"

	"github.com/etcdbox/etcdbox/qemu"
)

func TestParseCmdlineSingleNode(t *testing.T) {
	c, err := parseCmdline("console=ttyS0 panic=-1 etcdbox.metadata=off", qemu.MAC("x", 0))
	if c != nil || err != nil {
		t.Fatalf("got %+v, %v: want the single-node mode", c, err)
	}
}

func TestParseCmdlineCluster(t *testing.T) {
	const list = "floor.cluster=f1=10.88.0.11,f2=10.88.0.12,f3=10.88.0.13"
	c, err := parseCmdline("console=ttyS0 "+list+" quiet", qemu.MAC("f2", 0))
	if err != nil {
		t.Fatal(err)
	}
	if c.self.name != "f2" || c.addr() != "10.88.0.12/24" {
		t.Errorf("self %+v, addr %s: want f2 by its MAC", c.self, c.addr())
	}
	if got, want := c.initialCluster(), "f1=http://10.88.0.11:2380,f2=http://10.88.0.12:2380,f3=http://10.88.0.13:2380"; got != want {
		t.Errorf("initial cluster %s, want %s", got, want)
	}
	c, err = parseCmdline(list+" floor.name=f3 floor.prefix=16", qemu.MAC("f2", 0))
	if err != nil {
		t.Fatal(err)
	}
	if c.self.name != "f3" || c.addr() != "10.88.0.13/16" {
		t.Errorf("self %+v, addr %s: want f3 by floor.name", c.self, c.addr())
	}
	if c.tlsSeed != nil || c.scheme() != "http" {
		t.Errorf("no %s: want plain http, got %s", keyTLS, c.scheme())
	}
	seed := strings.Repeat("ab", 32)
	c, err = parseCmdline(list+" floor.name=f1 floor.tls="+seed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.tlsSeed) != 32 || c.tlsSeed[0] != 0xab {
		t.Errorf("seed %x, want %s", c.tlsSeed, seed)
	}
	if got, want := c.initialCluster(), "f1=https://10.88.0.11:2380,f2=https://10.88.0.12:2380,f3=https://10.88.0.13:2380"; got != want {
		t.Errorf("initial cluster %s, want %s", got, want)
	}
	for cmdline, want := range map[string]string{
		list + " floor.name=f1 floor.tls=abc":    "want 32 bytes in hexadecimal",
		list:                                     "has this node's MAC",
		list + " floor.name=f9":                  "not a member",
		list + " floor.prefix=33":                "prefix length",
		"floor.cluster=f1=10.88.0.11,f2":         `"f2"`,
		"floor.cluster=f1=10.0.0.1,f1=10.0.0.2":  "named twice",
		"floor.cluster=f1=fd00::1 floor.name=f1": "IPv4",
	} {
		if _, err := parseCmdline(cmdline, qemu.MAC("other", 0)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one with %q", cmdline, err, want)
		}
	}
}
