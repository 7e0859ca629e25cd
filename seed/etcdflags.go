package seed

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// flagSpec is the kind of value an allowed extra etcd flag takes.
type flagSpec struct {
	kind   flagKind
	values []string // kindEnum's values
}

type flagKind int

const (
	kindCount    flagKind = iota // a positive integer
	kindUint                     // a non-negative integer
	kindDuration                 // a Go duration, "5s", not negative
	kindBool                     // true or false
	kindEnum                     // one of values
	kindGates                    // Gate=true|false,... of FeatureGates
)

// extraArgFlags are the etcd flags that etcd.extraArgs may give: tuning
// of raft, the backend, requests, gRPC, metrics and checks, all of etcd
// v3.7 (TestExtraArgFlagsExistInEtcd runs the pinned etcd's --help).
var extraArgFlags = map[string]flagSpec{
	"heartbeat-interval":                   {kind: kindCount},
	"election-timeout":                     {kind: kindCount},
	"initial-election-tick-advance":        {kind: kindBool},
	"pre-vote":                             {kind: kindBool},
	"snapshot-count":                       {kind: kindCount},
	"snapshot-catchup-entries":             {kind: kindCount},
	"max-snapshots":                        {kind: kindUint},
	"max-wals":                             {kind: kindUint},
	"memory-mlock":                         {kind: kindBool},
	"backend-bbolt-freelist-type":          {kind: kindEnum, values: []string{"map", "array"}},
	"backend-batch-interval":               {kind: kindDuration},
	"backend-batch-limit":                  {kind: kindUint},
	"max-txn-ops":                          {kind: kindCount},
	"max-request-bytes":                    {kind: kindCount},
	"max-concurrent-streams":               {kind: kindCount},
	"grpc-keepalive-min-time":              {kind: kindDuration},
	"grpc-keepalive-interval":              {kind: kindDuration},
	"grpc-keepalive-timeout":               {kind: kindDuration},
	"raft-read-timeout":                    {kind: kindDuration},
	"raft-write-timeout":                   {kind: kindDuration},
	"metrics":                              {kind: kindEnum, values: []string{"basic", "extensive"}},
	"warning-unary-request-duration":       {kind: kindDuration},
	"warning-apply-duration":               {kind: kindDuration},
	"corrupt-check-time":                   {kind: kindDuration},
	"compact-hash-check-time":              {kind: kindDuration},
	"compaction-batch-limit":               {kind: kindCount},
	"compaction-sleep-interval":            {kind: kindDuration},
	"watch-progress-notify-interval":       {kind: kindDuration},
	"bootstrap-defrag-threshold-megabytes": {kind: kindUint},
	"feature-gates":                        {kind: kindGates},
}

// FeatureGates are etcd's feature gates that --feature-gates in
// etcd.extraArgs may set. etcdbox turns InitialCorruptCheck and
// CompactHashCheck on itself (they cannot be turned off), and AllAlpha
// and AllBeta would switch those too.
var FeatureGates = []string{
	"FastLeaseKeepAlive", "LeaseCheckpoint", "LeaseCheckpointPersist", "PriorityRequest",
	"StopGRPCServiceOnDefrag", "TxnModeWriteWithSharedBuffer",
}

// ExtraArgFlags lists the names of the flags etcd.extraArgs may give,
// sorted.
func ExtraArgFlags() []string {
	names := make([]string, 0, len(extraArgFlags))
	for n := range extraArgFlags {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ownKeys are etcd flags that the seed sets with keys of its own.
var ownKeys = map[string]string{
	"quota-backend-bytes":       "etcd.quotaBackendBytes",
	"log-level":                 "etcd.logLevel",
	"auto-compaction-mode":      "etcd.autoCompactionMode",
	"auto-compaction-retention": "etcd.autoCompactionRetention",
	"listen-metrics-urls":       "etcd.metricsPort",
	"listen-client-http-urls":   "etcd.httpPort",
	"initial-cluster-token":     "cluster",
	"discovery-srv":             "discovery.srv",
	"discovery-srv-name":        "discovery.srvName",
}

// securityFlags would loosen etcd's TLS, its client-certificate auth or
// what its HTTP side accepts.
var securityFlags = []string{
	"client-cert-auth", "peer-client-cert-auth", "auto-tls", "peer-auto-tls",
	"self-signed-cert-validity", "cipher-suites", "host-whitelist", "cors",
	"enable-pprof", "enable-grpc-gateway", "auth-token", "peer-skip-client-san-verification",
	"trusted-ca-file", "peer-trusted-ca-file", "key-file", "peer-key-file",
}

// ownedFlags are set by etcdbox (its member, files, listeners, logs).
var ownedFlags = []string{
	"name", "data-dir", "wal-dir", "config-file", "max-learners", "strict-reconfig-check",
	"v2-deprecation", "socket-reuse-port", "socket-reuse-address",
}

// check says what is wrong with value for this flag, or "".
func (f flagSpec) check(value string) string {
	switch f.kind {
	case kindCount, kindUint:
		n, err := strconv.ParseUint(value, 10, 63)
		switch {
		case err != nil:
			return "want a whole number"
		case n == 0 && f.kind == kindCount:
			return "want a positive whole number"
		}
	case kindDuration:
		if d, err := time.ParseDuration(value); err != nil || d < 0 {
			return "want a duration such as 500ms or 10s"
		}
	case kindBool:
		if value != "true" && value != "false" {
			return "want true or false"
		}
	case kindEnum:
		if !slices.Contains(f.values, value) {
			return "want one of " + strings.Join(f.values, ", ")
		}
	case kindGates:
		return gatesProblem(value)
	}
	return ""
}

// gatesProblem checks a --feature-gates value: Gate=true|false pairs of
// FeatureGates, each gate once.
func gatesProblem(value string) string {
	seen := map[string]bool{}
	for pair := range strings.SplitSeq(value, ",") {
		gate, on, _ := strings.Cut(pair, "=")
		switch {
		case gate == "InitialCorruptCheck" || gate == "CompactHashCheck":
			return gate + ": etcdbox turns this gate on itself"
		case !slices.Contains(FeatureGates, gate):
			return "want Gate=true|false pairs, the gates among " + strings.Join(FeatureGates, ", ")
		case on != "true" && on != "false":
			return gate + ": want true or false"
		case seen[gate]:
			return gate + ": given twice"
		}
		seen[gate] = true
	}
	return ""
}
