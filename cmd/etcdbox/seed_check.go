package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/etcdbox/etcdbox/seed"
)

// seedExample is what `etcdbox seed example` prints: a three-node
// cluster found by DNS SRV, every section shown. Its PKI is a placeholder
// (a test checks that it parses once a real CA is put in).
const seedExample = `# An etcdbox seed (README "Seed"). Check it with: etcdbox seed check FILE
cluster: prod                   # required; also etcd's --initial-cluster-token
# name: n1                      # default: the DHCP host name, else etcd-<last 3 MAC bytes>
discovery:
  srv: etcd.example.internal    # _etcd-server-ssl._tcp.etcd.example.internal
  initialSize: 3                # the first 3 names of the SRV answer may bootstrap
  # peers:                      # a static list instead of srv
  #   - {name: n1, host: 10.0.0.11}
# network:                      # default: DHCPv4 on the first NIC
#   interfaces:
#     - {name: eth0, addresses: [10.0.0.11/24], gateway: 10.0.0.1}
#   dns: [10.0.0.1]
pki:                            # etcdbox seed --pki DIR writes these
  caCert: |                     # the trust root: DIR/ca.crt (it signs admin certificates)
    CA CERTIFICATE PEM
  nodeCACert: |                 # a node CA under it, name-constrained: nodes issue their own leaves
    NODE CA CERTIFICATE PEM
  nodeCAKey: |
    NODE CA KEY PEM
  leafLifetime: 720h            # the nodes' own leaves; renewed at two thirds
etcd:
  clientPort: 2379              # gRPC alone
  peerPort: 2380
  httpPort: 2382                # etcd's /health, /metrics, /version, mutual TLS (the clientPort: share it)
  autoCompactionRetention: 1h   # history etcd keeps; 0: the clients compact (kube-apiserver does)
  # autoCompactionMode: revision  # then the retention is a count of revisions ("10000")
  # quotaBackendBytes: 4294967296  # default: 40% of DATA, at most 8 GiB
  # keepLeaderOnSlowDisk: true   # a leader on a slow disk keeps the leadership (default: it moves it to a follower whose disk keeps up)
  # logLevel: warn              # what the node keeps of etcd's log: debug, info (default), warn, error, panic, fatal
  # metricsPort: 2381           # plain HTTP /metrics, /health, /livez, /readyz on the node's address (read-only)
  # extraArgs:                  # more etcd flags, from an allow-list of tuning flags (README, Seed)
  #   - --heartbeat-interval=250
  #   - --election-timeout=2500
api:
  port: 9379                    # the node API
upgrade:
  registries: [registry.example.internal:5000]  # pull upgrades only from here
  # trustedKeys: [PUBLIC KEY PEM]  # stage only images signed by one of these (etcdbox sign)
  tries: 3                      # boots of a new slot before the firmware falls back
  settleSeconds: 30             # healthy this long before a new slot is blessed
  gateSeconds: 300              # else it is marked bad and the node boots the old slot
`

func newSeedCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "Check a seed YAML file with the node's own parser, and write nothing",
		Long: `Check reads FILE (at most 1 MiB) and parses it as a node would: every
unknown key and bad value is reported at once, each named by its path.
It exits 0 for a good seed and 1 otherwise.`,
		Example: `  etcdbox seed check seed.yaml`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := seed.ReadFile(args[0])
			if err != nil {
				return err
			}
			s, err := seed.Parse(data)
			if err != nil {
				return seedProblems(args[0], data, err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: a good seed for cluster %q (%s)\n", args[0], s.Cluster, seedDiscovery(s))
			return err
		},
	}
}

// seedDiscovery says in a few words how a seed's node finds its peers.
func seedDiscovery(s *seed.Seed) string {
	switch d := s.Discovery; {
	case d.SRV != "":
		return "DNS SRV under " + d.SRV
	case len(d.Peers) > 0:
		return fmt.Sprintf("%d static peers", len(d.Peers))
	}
	return "a single node"
}

func newSeedExampleCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "example",
		Short: "Print an example seed, every section shown",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), seedExample)
			return err
		},
	}
}
