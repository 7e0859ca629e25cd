package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/qemu/cluster"
	"github.com/etcdbox/etcdbox/rollout"
)

func init() { commands = append(commands, newUpgradeCmd) }

// targetFlags name the nodes of a roll: node API --endpoints (etcd on
// their hosts or at --etcd-endpoints) with the admin certificate of
// --pki (or --cacert, --cert and --key), or a local cluster's --dir.
type targetFlags struct {
	endpoints     []string
	etcdEndpoints []string
	dir           string
	tls           tlsFlags
	// timeout bounds connecting to etcd, and all of --status and --abort;
	// a roll's steps have their own bounds (--node-timeout, --ready-wait).
	timeout time.Duration
}

// upgradeFlags are the flags upgrade and cluster upgrade share.
type upgradeFlags struct {
	targetFlags
	image         string
	etcdVersion   string
	nodeTimeout   time.Duration
	readyWait     time.Duration
	status, abort bool
	noKexec       bool
	output        string // --status: table, json or yaml
}

func newUpgradeCmd() *cobra.Command {
	var f upgradeFlags
	cmd := &cobra.Command{
		Use:   "upgrade (--image REF | --status | --abort) (--endpoints URL[,URL...] --pki DIR | --dir DIR)",
		Short: "Roll an image over the cluster, one node at a time, health-gated",
		Long: `Upgrade rolls the image REF (pinned by digest) over every node: followers
first, the leader last after handing leadership over. Before each node it
checks that every member is started, voting and healthy and that no alarm
is raised; then the node takes a snapshot onto DATA, stages REF into its
inactive slot and reboots into it. The node is done once it runs the new
slot blessed, as a healthy voter. A node that falls back to its old slot
stops the roll with the reason.

Every node's inactive slot is staged first, held, all at once; each
node's turn is then the snapshot, the arming and the reboot. A node
reboots into its armed slot with kexec, skipping the firmware and the
bootloader; it counts the try on its ESP as systemd-boot would, so a
slot that panics, hangs or fails its gate still ends in the old slot
through a firmware reboot. --no-kexec reboots every node through the
firmware instead (so does a node that cannot kexec, or whose kernel
command line says etcdbox.kexec=off).

The roll holds the etcd lock /etcdbox/upgrade/lock, records its target in
/etcdbox/upgrade/target and each node's progress under
/etcdbox/upgrade/nodes/. --status prints them; --abort deletes the target,
which stops a running roll before its next node.

Version rules: an image whose etcd skips a minor is refused; before the
last member moves to a new minor the roll checks that the cluster version
has not risen yet (past it, rolling back by slot swap is no longer safe).

--endpoints names the node APIs (https://host:port, default port 9379);
etcd is reached on the same hosts at port 2379 unless --etcd-endpoints
names them (same order). --dir takes both from a local cluster
(etcdbox cluster up) and the admin certificate from DIR/pki; --pki, or
--cacert, --cert and --key, name it otherwise.

--timeout bounds connecting to etcd (each endpoint that does not answer
is named, with why) and all of --status and --abort. A roll's steps have
their own bounds: --node-timeout for one node, snapshot to blessed, and
--ready-wait for the cluster's health before each node.`,
		Example: `  etcdbox upgrade --image registry.example/etcdbox@sha256:... --endpoints 10.0.0.11,10.0.0.12,10.0.0.13 --pki pki/
  etcdbox upgrade --status --dir run/
  etcdbox upgrade --abort --dir run/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runUpgrade(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	addUpgradeFlags(cmd, &f, true)
	return cmd
}

func addUpgradeFlags(cmd *cobra.Command, f *upgradeFlags, endpoints bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.image, "image", "", "image reference pinned by digest (host:port/repo@sha256:...)")
	addTargetFlags(cmd, &f.targetFlags, endpoints)
	fl.StringVar(&f.etcdVersion, "etcd-version", "", "the image's etcd version, for the version rules (default: read from the image's labels)")
	fl.DurationVar(&f.nodeTimeout, "node-timeout", 10*time.Minute, "how long one node may take, snapshot to blessed")
	fl.DurationVar(&f.readyWait, "ready-wait", 2*time.Minute, "how long to wait for the cluster to be healthy before each node")
	fl.BoolVar(&f.status, "status", false, "print the roll's target and each node's record, and exit")
	fl.BoolVar(&f.abort, "abort", false, "delete the roll's target: a running roll stops before its next node")
	fl.BoolVar(&f.noKexec, "no-kexec", false, "reboot each node through the firmware, not with kexec into its armed slot")
	addOutputFlag(cmd, &f.output, "--status output")
	cmd.MarkFlagsMutuallyExclusive("image", "status", "abort")
	cmd.MarkFlagsOneRequired("image", "status", "abort")
}

// addTargetFlags adds --dir and --timeout, and with endpoints
// --endpoints, --etcd-endpoints and the TLS flags, one of --endpoints and
// --dir required.
func addTargetFlags(cmd *cobra.Command, f *targetFlags, endpoints bool) {
	fl := cmd.Flags()
	if endpoints {
		fl.StringSliceVar(&f.endpoints, "endpoints", nil, "node API endpoints, comma-separated (https://host:port)")
		fl.StringSliceVar(&f.etcdEndpoints, "etcd-endpoints", nil, "etcd client URLs, in the order of --endpoints (default: their hosts, port 2379)")
		f.tls.add(cmd)
	}
	fl.StringVar(&f.dir, "dir", "", "local cluster directory (reads state.json and pki/)")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long connecting to etcd may take, and all of --status or --abort (a roll's steps: --node-timeout, --ready-wait)")
	if endpoints {
		cmd.MarkFlagsOneRequired("endpoints", "dir")
		cmd.MarkFlagsMutuallyExclusive("endpoints", "dir")
	}
}

// rollTargets turns the flags into the roll's nodes, whose APIs it
// reaches with the TLS configuration tlsFor makes of the admin
// certificate's files and the PKI directory they are in ("" for
// --cacert, --cert and --key; adminTLS for a roll); it returns that
// directory and configuration too.
func rollTargets(f targetFlags, tlsFor func(files nodeapi.TLSFiles, pkiDir string) (*tls.Config, error)) ([]rollout.Node, string, *tls.Config, error) {
	var apis, etcds []string
	if f.dir != "" {
		st, err := cluster.ReadState(f.dir)
		if err != nil {
			return nil, "", nil, err
		}
		if len(st.Nodes) == 0 {
			return nil, "", nil, fmt.Errorf("%s lists no nodes", filepath.Join(f.dir, cluster.StateFile))
		}
		for _, n := range st.Nodes {
			apis = append(apis, "https://127.0.0.1:"+strconv.Itoa(n.APIPort))
			etcds = append(etcds, n.Endpoint())
		}
	} else {
		if len(f.etcdEndpoints) > 0 && len(f.etcdEndpoints) != len(f.endpoints) {
			return nil, "", nil, fmt.Errorf("--etcd-endpoints names %d endpoints and --endpoints %d; give one per node, in the same order", len(f.etcdEndpoints), len(f.endpoints))
		}
		for i, e := range f.endpoints {
			u, err := nodeapi.ParseEndpoint(e)
			if err != nil {
				return nil, "", nil, err
			}
			apis = append(apis, u)
			if len(f.etcdEndpoints) > 0 {
				etcds = append(etcds, f.etcdEndpoints[i])
			} else {
				pu, _ := url.Parse(u)
				etcds = append(etcds, "https://"+net.JoinHostPort(pu.Hostname(), "2379"))
			}
		}
	}
	files, pkiDir, err := f.tls.resolve(f.dir)
	if err != nil {
		return nil, "", nil, err
	}
	tc, err := tlsFor(files, pkiDir)
	if err != nil {
		return nil, "", nil, err
	}
	var nodes []rollout.Node
	for i, a := range apis {
		c, err := nodeapi.NewClientTLS(a, tc)
		if err != nil {
			closeNodes(nodes)
			return nil, "", nil, err
		}
		nodes = append(nodes, rollout.Node{API: c, EtcdEndpoint: etcds[i]})
	}
	return nodes, pkiDir, tc, nil
}

// closeNodes closes the idle connections of the nodes' API clients.
func closeNodes(nodes []rollout.Node) {
	for _, n := range nodes {
		if c, ok := n.API.(*nodeapi.Client); ok {
			c.Close()
		}
	}
}

// adminTLS is a roll's TLS configuration: the admin certificate.
func adminTLS(files nodeapi.TLSFiles, _ string) (*tls.Config, error) { return files.Config() }

// dialRollEtcd connects to the nodes' etcd with tc once one answers
// within ctx, whose deadline timeout set (probeEtcd); close closes the
// connection.
func dialRollEtcd(ctx context.Context, nodes []rollout.Node, tc *tls.Config, timeout time.Duration) (e *rollout.EtcdClient, close func() error, err error) {
	eps := etcdEndpoints(nodes)
	if err := probeEtcd(ctx, eps, tc); err != nil {
		return nil, nil, withinTimeout(ctx, err, timeout)
	}
	cli, err := rollout.Dial(eps, tc)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to etcd: %w", err)
	}
	return rollout.NewEtcd(cli, tc), cli.Close, nil
}

// etcdEndpoints are the nodes' etcd endpoints.
func etcdEndpoints(nodes []rollout.Node) []string {
	var eps []string
	for _, n := range nodes {
		eps = append(eps, n.EtcdEndpoint)
	}
	return eps
}

func runUpgrade(ctx context.Context, f upgradeFlags, out io.Writer) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	if f.image != "" {
		if err := nodeapi.CheckImageRef(f.image); err != nil {
			return err
		}
	}
	nodes, _, tc, err := rollTargets(f.targetFlags, adminTLS)
	if err != nil {
		return err
	}
	defer closeNodes(nodes)
	qctx, cancel := context.WithTimeout(ctx, f.timeout) // connecting, --status, --abort
	defer cancel()
	e, closeEtcd, err := dialRollEtcd(qctx, nodes, tc, f.timeout)
	if err != nil {
		return err
	}
	defer closeEtcd()
	switch {
	case f.status:
		s, err := rollout.ReadStatus(qctx, e)
		if err != nil {
			return etcdFailed(qctx, err, etcdEndpoints(nodes), f.timeout)
		}
		if f.output != "table" {
			return emit(out, f.output, rollStatusJSON(s))
		}
		printRollStatus(out, s)
		return nil
	case f.abort:
		if err := e.DeleteTarget(qctx); err != nil {
			return etcdFailed(qctx, err, etcdEndpoints(nodes), f.timeout)
		}
		fmt.Fprintf(out, "target deleted: a running roll stops before its next node\n")
		return nil
	}
	etcdVersion := f.etcdVersion
	if etcdVersion == "" {
		etcdVersion = imageEtcdVersion(ctx, f.image, f.dir, out)
	}
	r := &rollout.Roll{
		Image: f.image, ImageEtcd: etcdVersion, Nodes: nodes, Etcd: e, By: rollBy(),
		NodeTimeout: f.nodeTimeout, ReadyWait: f.readyWait, Log: lineLogger(out), NoKexec: f.noKexec,
	}
	return r.Run(ctx)
}

// rollBy names who started the roll, for the target record.
func rollBy() string {
	host, _ := os.Hostname()
	user := os.Getenv("USER")
	if user == "" {
		user = strconv.Itoa(os.Getuid())
	}
	return user + "@" + host
}

// printRollStatus prints the target and one row per node record.
func printRollStatus(out io.Writer, s rollout.Status) {
	if s.Target == nil {
		fmt.Fprintln(out, "target: none")
	} else {
		fmt.Fprintf(out, "target: %s (started %s by %s", s.Target.Image, s.Target.Started.UTC().Format(time.RFC3339), s.Target.By)
		if s.Target.Etcd != "" {
			fmt.Fprintf(out, ", etcd %s", s.Target.Etcd)
		}
		fmt.Fprintln(out, ")")
	}
	if len(s.Records) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tSTATE\tSLOT\tUPDATED\tIMAGE\tERROR")
	for _, r := range s.Records {
		fmt.Fprintf(w, "%s\t%s\t%s->%s\t%s\t%s\t%s\n", r.Name, r.State, r.From, r.To, r.Updated.UTC().Format(time.RFC3339), r.Image, orDefault(r.Error, "-"))
	}
	w.Flush()
}

// imageEtcdVersion reads the image's etcd version from its config label
// io.etcdbox.etcd (etcdbox build writes it), or returns "" when the
// registry cannot be read from here; the roll then learns it from the
// first node. In a local cluster (dir set), a reference to the guests'
// registry is read through its host loopback address instead.
func imageEtcdVersion(ctx context.Context, ref, dir string, out io.Writer) string {
	opts := []name.Option{name.StrictValidation}
	if dir != "" {
		if addr, err := cluster.RegistryAddr(dir); err == nil {
			ref = strings.Replace(ref, cluster.GuestRegistry()+"/", addr+"/", 1)
			opts = append(opts, name.Insecure)
		}
	}
	r, err := name.ParseReference(ref, opts...)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		var img v1.Image
		if img, err = remote.Image(r, remote.WithContext(ctx)); err == nil {
			var cf *v1.ConfigFile
			if cf, err = img.ConfigFile(); err == nil {
				if v := cf.Config.Labels["io.etcdbox.etcd"]; v != "" {
					return v
				}
				err = errors.New("no io.etcdbox.etcd label")
			}
		}
	}
	fmt.Fprintf(out, "the image's etcd version: %v (use --etcd-version)\n", err)
	return ""
}
