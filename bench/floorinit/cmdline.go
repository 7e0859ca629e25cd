package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/etcdbox/etcdbox/bench/internal/floorpki"
	"github.com/etcdbox/etcdbox/qemu"
)

// Kernel command line keys of the cluster mode.
const (
	// keyCluster lists the members, name=address, comma-separated:
	// floor.cluster=f1=10.88.0.11,f2=10.88.0.12,f3=10.88.0.13. With it
	// the floor runs a member of that cluster, its data on the DATA
	// partition; without it, the single node of the boot bench.
	keyCluster = "floor.cluster"
	// keyName names this node's member. Without it the node is the
	// member whose name gives its NIC's MAC by qemu.MAC(name, 0), as the
	// harness derives it, so one image serves every member.
	keyName = "floor.name"
	// keyPrefix is the length of the network prefix; default 24.
	keyPrefix = "floor.prefix"
	// keyTLS, with the hexadecimal seed of the run's floor CA
	// (bench/internal/floorpki), makes the cluster speak mutual TLS as
	// an etcdbox node's etcd does; without it, plain http.
	keyTLS = "floor.tls"
)

// member is one member of a floor cluster.
type member struct {
	name string
	addr netip.Addr
}

// clusterConfig is the cluster mode's configuration.
type clusterConfig struct {
	self    member
	members []member
	prefix  int
	tlsSeed []byte // nil: plain http
}

// scheme is the members' URL scheme.
func (c clusterConfig) scheme() string {
	if c.tlsSeed != nil {
		return "https"
	}
	return "http"
}

// addr is this node's address with the prefix, for its NIC.
func (c clusterConfig) addr() string { return fmt.Sprintf("%s/%d", c.self.addr, c.prefix) }

// initialCluster is etcd's --initial-cluster.
func (c clusterConfig) initialCluster() string {
	var parts []string
	for _, m := range c.members {
		parts = append(parts, m.name+"="+c.scheme()+"://"+net.JoinHostPort(m.addr.String(), "2380"))
	}
	return strings.Join(parts, ",")
}

// parseCmdline reads the cluster mode's keys from a kernel command line;
// mac is this node's NIC address, for a command line without keyName.
// It returns nil, nil when the command line has no keyCluster: the
// single-node mode.
func parseCmdline(cmdline string, mac net.HardwareAddr) (*clusterConfig, error) {
	kv := map[string]string{}
	for _, f := range strings.Fields(cmdline) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.HasPrefix(k, "floor.") {
			kv[k] = v
		}
	}
	list, ok := kv[keyCluster]
	if !ok {
		return nil, nil
	}
	c := &clusterConfig{prefix: 24}
	if p, ok := kv[keyPrefix]; ok {
		if _, err := fmt.Sscanf(p, "%d", &c.prefix); err != nil || c.prefix < 8 || c.prefix > 30 {
			return nil, fmt.Errorf("%s=%s: want a prefix length from 8 to 30", keyPrefix, p)
		}
	}
	if h, ok := kv[keyTLS]; ok {
		seed, err := floorpki.ParseSeed(h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keyTLS, err)
		}
		c.tlsSeed = seed
	}
	for _, e := range strings.Split(list, ",") {
		name, a, ok := strings.Cut(e, "=")
		ip, err := netip.ParseAddr(a)
		if !ok || name == "" || err != nil || !ip.Is4() {
			return nil, fmt.Errorf("%s: %q: want name=IPv4 address", keyCluster, e)
		}
		if slices.ContainsFunc(c.members, func(m member) bool { return m.name == name }) {
			return nil, fmt.Errorf("%s: %s named twice", keyCluster, name)
		}
		c.members = append(c.members, member{name: name, addr: ip})
	}
	name, named := kv[keyName]
	for _, m := range c.members {
		if (named && m.name == name) || (!named && slices.Equal(qemu.MAC(m.name, 0), mac)) {
			c.self = m
			return c, nil
		}
	}
	if named {
		return nil, fmt.Errorf("%s=%s: not a member of %s=%s", keyName, name, keyCluster, list)
	}
	return nil, errors.New("no member of " + keyCluster + " has this node's MAC " + mac.String() + " (qemu.MAC(name, 0)); name it with " + keyName + "=")
}
