package rollout

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrVersion is what CheckVersions wraps when the image's etcd may not
// replace the cluster's.
var ErrVersion = errors.New("etcd version rule")

// Minor is an etcd major.minor version.
type Minor struct{ Major, Minor int }

func (m Minor) String() string { return fmt.Sprintf("%d.%d", m.Major, m.Minor) }

// less orders minors.
func (m Minor) less(o Minor) bool {
	return m.Major < o.Major || m.Major == o.Major && m.Minor < o.Minor
}

// next is the minor after m. etcd has had major 3 since 2016; a new major
// is not one minor on.
func (m Minor) next() Minor { return Minor{m.Major, m.Minor + 1} }

// ParseMinor reads the major.minor of an etcd version such as "3.6.16" or
// "v3.7.3".
func ParseMinor(v string) (Minor, error) {
	s := strings.TrimPrefix(v, "v")
	parts := strings.SplitN(s, ".", 3)
	if len(parts) < 2 {
		return Minor{}, fmt.Errorf("etcd version %q: want major.minor.patch", v)
	}
	maj, err1 := strconv.Atoi(parts[0])
	mnr, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || maj < 0 || mnr < 0 {
		return Minor{}, fmt.Errorf("etcd version %q: want major.minor.patch", v)
	}
	return Minor{maj, mnr}, nil
}

// VersionPlan is what a roll does to etcd's version.
type VersionPlan struct {
	// To is the image's etcd minor; From the lowest minor a node runs.
	From, To Minor
	// Upgrade: some node moves to a higher minor, and the cluster
	// version rises once the last one has.
	Upgrade bool
	// Downgrade: nodes move one minor down; the roll enables etcd's
	// downgrade first.
	Downgrade bool
}

// CheckVersions checks the image's etcd version (target) against the
// versions the nodes run (name -> version) and says what the roll does.
// Allowed: the same minor (patch releases, or an image change only), one
// minor up (from nodes on that minor or already on the target's, as in a
// roll resumed halfway), one minor down. Refused, wrapping ErrVersion:
// skipping a minor either way, or nodes already spread over two minors
// when going down.
func CheckVersions(nodes map[string]string, target string) (VersionPlan, error) {
	to, err := ParseMinor(target)
	if err != nil {
		return VersionPlan{}, fmt.Errorf("%w: image: %v", ErrVersion, err)
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	plan := VersionPlan{From: to, To: to}
	var problems []string
	for _, n := range names {
		m, err := ParseMinor(nodes[n])
		if err != nil {
			problems = append(problems, fmt.Sprintf("node %s: %v", n, err))
			continue
		}
		switch {
		case m == to:
		case m.next() == to:
			plan.Upgrade = true
		case to.next() == m:
			plan.Downgrade = true
		case m.less(to):
			problems = append(problems, fmt.Sprintf("node %s runs etcd %s and the image has etcd %s: that skips %s; etcd upgrades one minor at a time, so roll to an image with etcd %s first",
				n, nodes[n], target, m.next(), m.next()))
		default:
			problems = append(problems, fmt.Sprintf("node %s runs etcd %s and the image has etcd %s: etcd downgrades one minor at a time, so roll to an image with etcd %d.%d first",
				n, nodes[n], target, m.Major, m.Minor-1))
		}
		if m.less(plan.From) {
			plan.From = m
		}
	}
	if plan.Upgrade && plan.Downgrade {
		problems = append(problems, fmt.Sprintf("nodes run etcd %s and above %s at once", plan.From, to))
	}
	if plan.Downgrade {
		plan.From = to.next()
	}
	if len(problems) > 0 {
		return plan, fmt.Errorf("%w: %s", ErrVersion, strings.Join(problems, "; "))
	}
	return plan, nil
}

// LastMover reports whether moving node is the point of no return of an
// upgrade across a minor: every other node already runs the target minor
// and node does not, so the cluster version rises once it has moved.
func LastMover(plan VersionPlan, nodes map[string]string, node string) bool {
	if !plan.Upgrade {
		return false
	}
	for n, v := range nodes {
		m, err := ParseMinor(v)
		if err != nil {
			return false
		}
		if (n == node) == (m == plan.To) {
			return false
		}
	}
	return true
}
