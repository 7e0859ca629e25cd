package seed

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Compaction modes (etcd's --auto-compaction-mode).
const (
	CompactionPeriodic = "periodic"
	CompactionRevision = "revision"
)

// LogLevels are etcd's log levels, least severe first: the values of
// etcd.logLevel.
var LogLevels = []string{"debug", "info", "warn", "error", "panic", "fatal"}

// Limits of etcd.extraArgs.
const (
	MaxExtraArgs   = 32
	MaxExtraArgLen = 256
)

func (p *problems) etcd(e *Etcd) {
	p.compaction(e)
	if q := e.QuotaBackendBytes; q != 0 && (q < MinQuotaBackendBytes || q > MaxQuotaBackendBytes) {
		p.add("etcd.quotaBackendBytes", "%d: want %d (64 MiB) to %d (64 GiB), or unset to size it to DATA", q, int64(MinQuotaBackendBytes), int64(MaxQuotaBackendBytes))
	}
	if l := e.LogLevel; l != "" && !slices.Contains(LogLevels, l) {
		p.add("etcd.logLevel", "%q: want one of %s", l, strings.Join(LogLevels, ", "))
	}
	p.extraArgs(e.ExtraArgs)
}

// compaction checks etcd.autoCompactionMode and the retention it reads.
func (p *problems) compaction(e *Etcd) {
	r := e.AutoCompactionRetention
	switch e.AutoCompactionMode {
	case "", CompactionPeriodic:
		if r == "" || r == "0" {
			return
		}
		d, err := time.ParseDuration(r)
		switch {
		case err != nil:
			p.add("etcd.autoCompactionRetention", "%q: want a duration such as 30m or 2h, or 0 for no compaction by etcd", r)
		case d < MinAutoCompactionRetention:
			p.add("etcd.autoCompactionRetention", "%q: shorter than %s", r, MinAutoCompactionRetention)
		}
	case CompactionRevision:
		if n, err := strconv.ParseInt(r, 10, 64); err != nil || n < 1 {
			p.add("etcd.autoCompactionRetention", "%q: in revision mode, want a positive number of revisions to keep (for no compaction by etcd: 0 in periodic mode)", r)
		}
	default:
		p.add("etcd.autoCompactionMode", "%q: want periodic or revision", e.AutoCompactionMode)
	}
}

// extraArgs checks etcd.extraArgs: each "--name=value" of an allowed
// tuning flag with a value of its kind, none twice, and together within
// etcd's own rule for the election timeout.
func (p *problems) extraArgs(args []string) {
	if len(args) > MaxExtraArgs {
		p.add("etcd.extraArgs", "%d flags: at most %d", len(args), MaxExtraArgs)
	}
	seen := map[string]int{}
	values := map[string]string{}
	for i, a := range args {
		at := fmt.Sprintf("etcd.extraArgs[%d]", i)
		if len(a) > MaxExtraArgLen {
			p.add(at, "%q: longer than %d bytes", a, MaxExtraArgLen)
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !ok || !flagNameRE.MatchString(name) {
			p.add(at, "%q: want --name=value (booleans too: --memory-mlock=true)", a)
			continue
		}
		shown := shortened(name) // never more than maxShown bytes of input
		if j, dup := seen[name]; dup {
			p.add(at, "--%s already given by etcd.extraArgs[%d]", shown, j)
			continue
		}
		seen[name] = i
		f, ok := extraArgFlags[name]
		if !ok {
			p.add(at, "--%s: %s", shown, refusal(name))
			continue
		}
		if problem := f.check(value); problem != "" {
			p.add(at, "--%s=%q: %s", name, value, problem)
			continue
		}
		values[name] = value
	}
	beat, election := uint64(DefaultHeartbeatMs), uint64(DefaultElectionMs)
	if v, ok := values["heartbeat-interval"]; ok {
		beat, _ = strconv.ParseUint(v, 10, 64)
	}
	if v, ok := values["election-timeout"]; ok {
		election, _ = strconv.ParseUint(v, 10, 64)
	}
	switch {
	case election > MaxElectionMs:
		p.add("etcd.extraArgs", "--election-timeout %d ms: at most %d", election, uint64(MaxElectionMs))
	case election/5 < beat: // election < 5*beat, without overflow
		p.add("etcd.extraArgs", "--election-timeout %d ms: want at least 5 times --heartbeat-interval (%d ms)", election, beat)
	}
}

// flagNameRE is the form of etcd's flag names.
var flagNameRE = regexp.MustCompile(`^[a-z0-9][-a-z0-9]*$`)

// etcd's own defaults and limit of the raft timings (embed.Config).
const (
	DefaultHeartbeatMs = 100
	DefaultElectionMs  = 1000
	MaxElectionMs      = 50000
)

// refusal says why an etcd flag that is not on the allow-list is refused.
func refusal(name string) string {
	if key, ok := ownKeys[name]; ok {
		return "has its own key: " + key
	}
	switch {
	case slices.Contains(securityFlags, name) || strings.Contains(name, "insecure") || strings.Contains(name, "tls") ||
		strings.Contains(name, "cert") || strings.Contains(name, "crl") || strings.HasPrefix(name, "cipher"):
		return "would weaken TLS or client-certificate auth: etcdbox keeps every etcd listener on mutual TLS with its own certificates"
	case strings.HasPrefix(name, "unsafe") || name == "force-new-cluster":
		return "unsafe: never passed to etcd (etcdbox recover is the way out of a lost quorum)"
	case slices.Contains(ownedFlags, name) || strings.HasPrefix(name, "listen-") || strings.HasPrefix(name, "advertise-") ||
		strings.HasPrefix(name, "initial-") || strings.HasPrefix(name, "discovery") || strings.HasSuffix(name, "-file") ||
		strings.HasPrefix(name, "log"):
		return "etcdbox sets this flag itself"
	}
	msg := "not one of the tuning flags etcdbox passes to etcd (README, Seed)"
	best, bestD := "", 3
	for known := range extraArgFlags {
		if d := editDistance(name, known); d < bestD || d == bestD && known < best {
			best, bestD = known, d
		}
	}
	if best != "" {
		msg += fmt.Sprintf(" (did you mean --%s?)", best)
	}
	return msg
}
