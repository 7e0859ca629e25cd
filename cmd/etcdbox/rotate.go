package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/rollout"
)

func init() { commands = append(commands, newRotateCACmd) }

// rotateFlags are the flags rotate-ca and cluster rotate-ca share.
type rotateFlags struct {
	targetFlags
	nodeTimeout   time.Duration
	readyWait     time.Duration
	status, abort bool
	output        string // --status: table, json or yaml
	// srv and networks widen the node CA's scope (NodeScope.Domains and
	// Networks); they are all of it when the nodes present no node CA.
	srv      []string
	networks []string
}

func newRotateCACmd() *cobra.Command {
	var f rotateFlags
	cmd := &cobra.Command{
		Use:   "rotate-ca (--endpoints URL[,URL...] --pki DIR | --dir CLUSTERDIR) [--status | --abort]",
		Short: "Roll the next CA (etcdbox pki rotate-ca) over the cluster, with no downtime",
		Long: `Rotate-ca replaces the cluster's root CA, the one in the PKI directory
(--pki, or CLUSTERDIR/pki with --dir), with the next one that etcdbox pki
rotate-ca made in its next/ subdirectory. It issues one node CA under the
new root, with the name constraints of the node CA the nodes present now
(--srv and --node-network add to them; they are all of them for nodes
whose seed carries no node CA), and takes every node through three
phases, each on every node before the next, one node at a time, followers
first, the leader last after handing leadership over where etcd restarts:

  trust    the node trusts the old and the new root; etcd restarts
  reissue  the node's leaves come from the new node CA; no restart
  drop     the node trusts the new root only; etcd restarts

Before each node the cluster must be ready, as for an upgrade. Clients of
etcd must trust DIR/ca-bundle.crt before the reissue phase. The old admin
certificate works until the drop phase, the new one from the trust phase
on; this command offers both. Once every node is done, the new CA is
promoted: the old ca.crt, ca.key, admin.crt and admin.key move to
DIR/previous/, DIR/next/ becomes DIR. Make new seeds with etcdbox seed
--pki DIR then.

The rotation holds the etcd lock /etcdbox/upgrade/lock (no upgrade runs
meanwhile), records its target in /etcdbox/rotate-ca/target and each
node's last phase under /etcdbox/rotate-ca/nodes/. --status prints them;
--abort deletes the target, which stops a running rotation before its
next node. Nodes keep the phase they reached, across reboots; running
rotate-ca again resumes where it stopped. --status and --abort may take
the admin certificate from --cacert, --cert and --key; a rotation needs
the PKI directory.

--timeout bounds connecting to etcd (each endpoint that does not answer
is named, with why) and all of --status and --abort; a phase on one node
is bounded by --node-timeout, the wait for a healthy cluster before each
node by --ready-wait.`,
		Example: `  etcdbox pki rotate-ca --dir pki/
  etcdbox rotate-ca --endpoints 10.0.0.11,10.0.0.12,10.0.0.13 --pki pki/
  etcdbox rotate-ca --status --endpoints 10.0.0.11 --pki pki/
  etcdbox rotate-ca --abort --dir run/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRotateCA(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	addRotateFlags(cmd, &f, true)
	return cmd
}

// newClusterRotateCACmd is `etcdbox cluster rotate-ca`: etcdbox
// rotate-ca for a local cluster.
func newClusterRotateCACmd() *cobra.Command {
	var f rotateFlags
	cmd := &cobra.Command{
		Use:   "rotate-ca --dir DIR [--status | --abort]",
		Short: "Roll the next CA over a local cluster (see etcdbox rotate-ca)",
		Long: `Rotate-ca rolls the next CA in DIR/pki/next (etcdbox pki rotate-ca --dir
DIR/pki) over the local cluster in DIR, as etcdbox rotate-ca does, and
promotes it to DIR/pki once every node is on it. cluster add makes the
seeds of new nodes with DIR/pki, so with the new CA from then on.`,
		Example: `  etcdbox pki rotate-ca --dir run/pki
  etcdbox cluster rotate-ca --dir run/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRotateCA(cmd.Context(), f, cmd.OutOrStdout())
		},
	}
	addRotateFlags(cmd, &f, false)
	cmd.MarkFlagRequired("dir")
	return cmd
}

func addRotateFlags(cmd *cobra.Command, f *rotateFlags, endpoints bool) {
	addTargetFlags(cmd, &f.targetFlags, endpoints)
	fl := cmd.Flags()
	fl.DurationVar(&f.nodeTimeout, "node-timeout", 10*time.Minute, "how long one node may take to put a phase in effect")
	fl.DurationVar(&f.readyWait, "ready-wait", 2*time.Minute, "how long to wait for the cluster to be healthy before each node")
	fl.BoolVar(&f.status, "status", false, "print the rotation's target and each node's record, and exit")
	fl.BoolVar(&f.abort, "abort", false, "delete the rotation's target: a running rotation stops before its next node")
	addOutputFlag(cmd, &f.output, "--status output")
	fl.StringSliceVar(&f.srv, "srv", nil, "a DNS domain the new node CA may sign names in (the SRV domain)")
	fl.StringSliceVar(&f.networks, "node-network", nil, "an address range the new node CA may sign addresses in (CIDR)")
	cmd.MarkFlagsMutuallyExclusive("status", "abort")
}

func runRotateCA(ctx context.Context, f rotateFlags, out io.Writer) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	extra, err := flagScope(f)
	if err != nil {
		return err
	}
	query := f.status || f.abort
	nodes, pkiDir, tc, err := rollTargets(f.targetFlags, func(files nodeapi.TLSFiles, pkiDir string) (*tls.Config, error) {
		return rotationTLS(files, pkiDir, query)
	})
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
		s, err := rollout.ReadRotationStatus(qctx, e)
		if err != nil {
			return withinTimeout(qctx, fmt.Errorf("read the CA rotation's records from etcd (%s): %w", etcdList(nodes), err), f.timeout)
		}
		if f.output != "table" {
			return emit(out, f.output, rotationStatusJSON(s))
		}
		printRotationStatus(out, s)
		return nil
	case f.abort:
		if err := e.DeleteRotationTarget(qctx); err != nil {
			return withinTimeout(qctx, fmt.Errorf("abort the CA rotation: etcd (%s): %w", etcdList(nodes), err), f.timeout)
		}
		fmt.Fprintln(out, "target deleted: a running rotation stops before its next node; the nodes keep the phase they reached, and etcdbox rotate-ca resumes it")
		return nil
	}
	return rotateCA(ctx, f, rotation{nodes: nodes, pkiDir: pkiDir, tc: tc, etcd: e, extra: extra}, out)
}

// etcdList names the nodes' etcd endpoints, for errors.
func etcdList(nodes []rollout.Node) string {
	var eps []string
	for _, n := range nodes {
		eps = append(eps, n.EtcdEndpoint)
	}
	return strings.Join(eps, ", ")
}

// rotationTLS is the TLS configuration rotate-ca reaches nodes and etcd
// with: nodeapi.RotationTLS of the CA in pkiDir and the next one. A
// query (--status, --abort) may do without a next CA, as after one was
// promoted: then the admin certificate (files) serves; so it does for a
// query with --cacert, --cert and --key (no pkiDir), which a rotation
// refuses: it reads the next CA from the PKI directory and promotes it.
func rotationTLS(files nodeapi.TLSFiles, pkiDir string, query bool) (*tls.Config, error) {
	if pkiDir == "" {
		if query {
			return files.Config()
		}
		return nil, usageError{errors.New("--cacert, --cert and --key serve rotate-ca --status and --abort only: a rotation needs --pki DIR (or --dir), whose next/ holds the next CA and which it promotes")}
	}
	next := filepath.Join(pkiDir, pki.NextDir)
	_, err := os.Stat(filepath.Join(next, pki.CACertFile))
	switch {
	case err == nil:
		return nodeapi.RotationTLS(pkiDir, next)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	case query:
		return files.Config()
	}
	return nil, fmt.Errorf("no next CA in %s: make it first with etcdbox pki rotate-ca --dir %s, and have the clients of etcd trust the bundle it writes", next, pkiDir)
}

// flagScope is the node CA scope --srv and --node-network give.
func flagScope(f rotateFlags) (pki.NodeScope, error) {
	var sc pki.NodeScope
	sc.Domains = append(sc.Domains, f.srv...)
	for _, c := range f.networks {
		_, n, err := net.ParseCIDR(c)
		if err != nil {
			return sc, usageError{fmt.Errorf("--node-network %q: want an address range such as 10.0.0.0/24", c)}
		}
		sc.Networks = append(sc.Networks, n)
	}
	return sc, nil
}

// rotation is what rotateCA works on.
type rotation struct {
	nodes  []rollout.Node
	pkiDir string
	tc     *tls.Config
	etcd   *rollout.EtcdClient
	extra  pki.NodeScope // from the flags
}

// rotateCA issues the node CA, rolls the rotation and promotes the next
// CA.
func rotateCA(ctx context.Context, f rotateFlags, r rotation, out io.Writer) error {
	if len(r.nodes) == 0 {
		return errors.New("no nodes to rotate")
	}
	nextCA, err := pki.LoadCAFiles(filepath.Join(r.pkiDir, pki.NextDir))
	if err != nil {
		return err
	}
	endpoint := r.nodes[0].API.(*nodeapi.Client).Endpoint()
	scope, found, err := presentScope(ctx, endpoint, r.tc)
	if err != nil {
		return err
	}
	if !found {
		fmt.Fprintf(out, "%s presents no node CA (its seed is older): the new node CA's scope is only what --srv and --node-network give\n", endpoint)
	}
	scope.Domains = append(scope.Domains, r.extra.Domains...)
	scope.Networks = append(scope.Networks, r.extra.Networks...)
	fmt.Fprintf(out, "new node CA: names %s; addresses %s\n", domainsText(scope.Domains), networksText(scope.Networks))
	nodeCA, err := nextCA.IssueNodeCA(scope, 0)
	if err != nil {
		return err
	}
	nodeKey, err := nodeCA.KeyPEM()
	if err != nil {
		return err
	}
	ro := &rollout.Rotation{
		NewCA: nextCA.CertPEM(), NodeCACert: nodeCA.CertPEM(), NodeCAKey: nodeKey,
		Nodes: r.nodes, Etcd: r.etcd, By: rollBy(),
		NodeTimeout: f.nodeTimeout, ReadyWait: f.readyWait, Log: lineLogger(out),
	}
	if err := ro.Run(ctx); err != nil {
		return err
	}
	if err := pki.PromoteNext(r.pkiDir); err != nil {
		return fmt.Errorf("every node is on the new CA, but: %w", err)
	}
	fmt.Fprintf(out, `promoted the new CA %q: %s holds it now, the old one is in %s
Make new seeds with etcdbox seed --pki %s; clients may trust %s alone
once none of them talks to a node on the old CA.
`, nextCA.Cert.Subject.CommonName, r.pkiDir, filepath.Join(r.pkiDir, pki.PreviousDir), r.pkiDir, filepath.Join(r.pkiDir, pki.CACertFile))
	return nil
}

// domainsText shows a node CA's DNS name constraints.
func domainsText(domains []string) string {
	if len(domains) == 0 {
		return "localhost only"
	}
	return strings.Join(domains, ", ") + " (and below), localhost"
}

// networksText shows a node CA's address ranges.
func networksText(nets []*net.IPNet) string {
	if len(nets) == 0 {
		return "any"
	}
	var s []string
	for _, n := range nets {
		s = append(s, n.String())
	}
	return strings.Join(s, ", ") + ", loopback"
}
