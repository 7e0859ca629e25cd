// Package vnet is a closed, rootless virtual network for a cluster of
// QEMU VMs, hosted in one process: an Ethernet switch the VMs join with
// QEMU's stream netdev over a unix socket, and the harness's own host on
// it (a gVisor network stack) serving DHCP, DNS and port forwards.
//
// Closed means: the DNS server answers only the cluster's own names and
// refuses everything else without asking anyone; the gateway routes and
// NATs nothing, so a guest reaches its peers and the gateway's DHCP and
// DNS, and nothing else. The harness reaches guests only through
// forwards from host loopback ports. (gvisor-tap-vsock's
// virtualnetwork, which NATs guest traffic to the host and forwards
// unknown DNS names upstream, is deliberately not used; see newStack.)
//
// The gateway is the subnet's first address (10.88.0.1 by default).
// Each Host gets a static DHCP lease by MAC: its address, the subnet
// mask, the gateway as DNS server, the domain as domain name and search
// list, and its name as host name (option 12); no router. DNS answers
//
//	<name>.<domain>                          A
//	_etcd-server-ssl._tcp.<domain>           SRV 0 10 2380 <name>.<domain>. (one per host)
//	_etcd-client-ssl._tcp.<domain>           SRV 0 10 2379 <name>.<domain>.
//	_etcd-{server,client}-ssl-<svc>._tcp...  the same, when Config.SRVName is <svc>
//
// with NXDOMAIN for other names under the domain and REFUSED for names
// outside it.
//
// In process:
//
//	n, err := vnet.New(vnet.Config{Dir: dir, Domain: "demo.internal", Hosts: []vnet.Host{
//		{Name: "n1", MAC: mac1, IP: netip.MustParseAddr("10.88.0.11")},
//	}})
//	args, err := vnet.QEMUArgs(vnet.SwitchSocket(dir), "vnet0", mac1) // -netdev stream,... -device virtio-net-pci,...
//	hostPort, err := n.Forward("127.0.0.1:0", netip.MustParseAddrPort("10.88.0.11:2379"))
//	defer n.Close()
//
// As a daemon that outlives the command that starts it, a process runs
// Serve(ctx, cfg); others drive it with a Client over the control
// socket in the same directory:
//
//	Dir/net.sock   the switch; QEMU connects here (QEMUArgs)
//	Dir/ctl.sock   the control API, HTTP/JSON (Client)
//
// QEMU 7.2's stream netdev connects once, when QEMU starts, and never
// reconnects: start the network first, and keep it up while VMs run.
package vnet
