// Package cluster runs a local etcdbox cluster: N QEMU VMs booted from
// one image on a closed qemu/vnet network, which gives them DHCP leases
// (the node name is the DHCP host name) and DNS with the cluster's A and
// SRV records. Every node gets the same NoCloud seed volume naming the
// SRV domain and the initial size, so the nodes find each other by DNS,
// bootstrap one cluster, and later nodes join it as learners. It is the
// library behind `etcdbox cluster` and the end-to-end tests.
//
//	c, err := cluster.Up(ctx, cluster.Config{
//		Dir: "run/cluster", Image: "out/etcdbox.img",
//		OVMFCode: code, OVMFVars: vars,
//		Netd: []string{"/usr/bin/etcdbox", "cluster", "netd"},
//		Log:  log.Printf,
//	}, 3)
//	n, err := c.Add(ctx)              // n4 joins as a learner and is promoted
//	rows, err := c.Status(ctx)        // member ID, role, leader, health, slot
//	err = c.Down(ctx, time.Minute)    // ACPI power-off, then the network
//
// A cluster directory D holds:
//
//	D/pki/         the CA and admin certificate (pki.Init), made unless there
//	D/seed.img     the seed volume every node boots with (holds the CA key)
//	D/net/         the network daemon's sockets and its log, netd.log
//	D/n1/ ...      one qemu work directory per node (disk, console.log)
//	D/state.json   the nodes, their addresses and forwarded ports
//	D/etcdctl.env  ETCDCTL_* settings for upstream etcdctl, every node listed
//
// The network is hosted by a daemon (Config.Netd, e.g. `etcdbox cluster
// netd`) that runs in its own session and outlives the command that
// started it; QEMU connects to its switch once, at start, so it is up
// before the VMs and goes down after them. Without Netd the network runs
// inside the calling process (tests).
//
// Down powers the VMs off and stops the network, keeping disks, the CA and
// state.json. Up on the same directory resumes: it starts a new network
// daemon, which knows nothing of the old one, so Up adds every node's host
// and port forwards again (asking for the host ports it had before, so
// etcdctl.env stays valid when they are free), and boots the nodes on
// their disks.
package cluster
