package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

func init() { commands = append(commands, newSeedCmd) }

// seedOptions are the flags of `etcdbox seed`.
type seedOptions struct {
	from, out, cluster, name, pkiDir, srv, srvName string
	peers                                          []string
	initialSize                                    int
	// networks narrow the node CA's addresses (--node-network).
	networks     []string
	leafLifetime string
	// warn prints a warning (the command's stderr).
	warn func(format string, args ...any)
}

// newSeedCmd is `etcdbox seed`: write a node's seed as YAML or as a
// NoCloud cidata volume.
func newSeedCmd() *cobra.Command {
	var o seedOptions
	cmd := &cobra.Command{
		Use:   "seed -o FILE",
		Short: "Write a node seed as YAML or as a NoCloud cidata volume",
		Long: `Write a seed (see the README for its keys), checked with the same parser
the node uses. The output is YAML when FILE ends in .yaml or .yml, the
kernel argument etcdbox.seed=... (gzipped, base64) when it ends in
.cmdline, else a NoCloud cidata volume (a FAT filesystem labelled "cidata" holding user-data
and meta-data, as cloud-localds makes it) to attach to a VM as a disk.

The seed comes from --from FILE, or from the flags: --cluster, --pki (a
directory made by "etcdbox pki init": the seed carries its CA certificate
and a new node CA under it, with which the node issues its own
certificates; the CA's key stays in the directory), --name, --srv/--srv-name
or --peer, and --initial-size. The node CA may sign only for the SRV
domain, the static peers' names and addresses, and --node-network ranges
(any address when none is known). --leaf-lifetime sets the life of the
node's own certificates (default 720h; renewed at two thirds).`,
		Example: `  etcdbox seed --cluster prod --pki pki/ --srv etcd.example.internal --initial-size 3 -o seed.img
  etcdbox seed --from seed.yaml -o seed.img
  etcdbox seed --cluster dev --pki pki/ --peer n1=10.0.0.11 --peer n2=10.0.0.12:2380:2379 -o seed.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.warn = func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), "warning: "+format+"\n", args...) }
			data, s, err := o.seed()
			if err != nil {
				return err
			}
			switch ext := filepath.Ext(o.out); {
			case ext == ".yaml" || ext == ".yml":
				if err := pki.WriteFileAtomic(o.out, data, 0o600); err != nil {
					return err
				}
			case ext == ".cmdline":
				arg, err := seed.Cmdline(data)
				if err != nil {
					return err
				}
				if n := len(arg); n > image.MaxCmdline-len(" console=ttyS0,115200 panic=10 etcdbox.slot=a") {
					o.warn("%s: the argument is %d bytes; with the image's own arguments the kernel command line may pass %d bytes, and the kernel cuts it there", o.out, n, image.MaxCmdline)
				}
				if err := pki.WriteFileAtomic(o.out, []byte(arg+"\n"), 0o600); err != nil {
					return err
				}
			default:
				meta := fmt.Sprintf("instance-id: %s-%s\n", s.Cluster, orDefault(s.Name, "node"))
				if s.Name != "" {
					meta += "local-hostname: " + s.Name + "\n"
				}
				epoch, err := image.EpochFromEnv()
				if err != nil {
					return err
				}
				if err := image.WriteCidata(o.out, data, []byte(meta), epoch); err != nil {
					return err
				}
			}
			fmt.Fprintln(cmd.OutOrStdout(), o.out)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.out, "output", "o", "", "output: seed YAML (.yaml, .yml), the kernel argument (.cmdline) or a cidata volume (anything else)")
	fl.StringVar(&o.from, "from", "", "take the seed from this YAML file instead of the flags")
	fl.StringVar(&o.cluster, "cluster", "", "cluster name (also etcd's initial-cluster token)")
	fl.StringVar(&o.name, "name", "", "node name (default: from DHCP, the hostname or the MAC address)")
	fl.StringVar(&o.pkiDir, "pki", "", "directory with the cluster CA (ca.crt, ca.key)")
	fl.StringVar(&o.srv, "srv", "", "DNS SRV discovery domain")
	fl.StringVar(&o.srvName, "srv-name", "", "SRV service name suffix, like etcd's --discovery-srv-name")
	fl.StringSliceVar(&o.peers, "peer", nil, "static peer NAME=HOST[:PEERPORT[:CLIENTPORT]] (repeatable)")
	fl.IntVar(&o.initialSize, "initial-size", 0, "number of members that bootstrap the cluster")
	fl.StringSliceVar(&o.networks, "node-network", nil, "an address range of the nodes, CIDR (repeatable): the node CA signs no other address")
	fl.StringVar(&o.leafLifetime, "leaf-lifetime", "", "life of the node's own certificates (default 720h)")
	cmd.MarkFlagRequired("output")
	cmd.AddCommand(newSeedCheckCmd(), newSeedExampleCmd())
	return cmd
}

// seed builds and checks the seed, returning its YAML.
func (o seedOptions) seed() ([]byte, *seed.Seed, error) {
	var data []byte
	if o.from != "" {
		if o.cluster != "" || o.pkiDir != "" || o.srv != "" || o.srvName != "" || len(o.peers) > 0 || o.name != "" || o.initialSize != 0 || len(o.networks) > 0 || o.leafLifetime != "" {
			return nil, nil, fmt.Errorf("--from takes the whole seed from %s; drop the other seed flags", o.from)
		}
		var err error
		if data, err = os.ReadFile(o.from); err != nil {
			return nil, nil, fmt.Errorf("--from: %w", err)
		}
	} else {
		s := &seed.Seed{Cluster: o.cluster, Name: o.name}
		s.Discovery = seed.Discovery{SRV: o.srv, SRVName: o.srvName, InitialSize: o.initialSize}
		for _, p := range o.peers {
			peer, err := parsePeerFlag(p)
			if err != nil {
				return nil, nil, err
			}
			s.Discovery.Peers = append(s.Discovery.Peers, peer)
		}
		if o.pkiDir == "" {
			return nil, nil, fmt.Errorf("--pki is required (a directory made by etcdbox pki init)")
		}
		scope := s.NodeScope()
		for _, c := range o.networks {
			_, n, err := net.ParseCIDR(c)
			if err != nil {
				return nil, nil, fmt.Errorf("--node-network %q: want an address range such as 10.0.0.0/24", c)
			}
			scope.Networks = append(scope.Networks, n)
		}
		issuing, legacy, err := seed.IssuingPKIFrom(o.pkiDir, scope)
		if err != nil {
			return nil, nil, fmt.Errorf("--pki: %w", err)
		}
		if legacy && o.warn != nil {
			o.warn("the CA in %s signs leaves only (made before node CAs): the seed carries its key, and any node can mint an admin certificate; make a new CA with etcdbox pki rotate-ca", o.pkiDir)
		}
		s.PKI = issuing
		s.PKI.LeafLifetime = o.leafLifetime
		if data, err = s.Marshal(); err != nil {
			return nil, nil, fmt.Errorf("seed: %w", err)
		}
	}
	s, err := seed.Parse(data)
	if err != nil {
		if o.from != "" {
			return nil, nil, seedProblems(o.from, data, err)
		}
		return nil, nil, fmt.Errorf("seed: %w", err)
	}
	return data, s, nil
}

// parsePeerFlag reads NAME=HOST[:PEERPORT[:CLIENTPORT]].
func parsePeerFlag(v string) (seed.Peer, error) {
	name, rest, ok := strings.Cut(v, "=")
	if !ok || name == "" || rest == "" {
		return seed.Peer{}, fmt.Errorf("--peer %q: want NAME=HOST[:PEERPORT[:CLIENTPORT]]", v)
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return seed.Peer{}, fmt.Errorf("--peer %q: want NAME=HOST[:PEERPORT[:CLIENTPORT]] (IPv6 hosts go in a seed file)", v)
	}
	p := seed.Peer{Name: name, Host: parts[0]}
	for i, port := range parts[1:] {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return seed.Peer{}, fmt.Errorf("--peer %q: bad port %q", v, port)
		}
		if i == 0 {
			p.PeerPort = n
		} else {
			p.ClientPort = n
		}
	}
	return p, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
