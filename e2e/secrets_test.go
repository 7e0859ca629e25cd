package e2e

import (
	"encoding/base64"
	"encoding/pem"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/seed"
)

// cmdlineSecrets are pieces of a seed given on the kernel command line
// that must show nowhere but in the kernel's own prints of its command
// line: a piece of the CA key, and a piece of the etcdbox.seed= value.
type cmdlineSecrets struct {
	arg     string // etcdbox.seed=<base64>
	markers map[string]string
}

func newCmdlineSecrets(t *testing.T, seedYAML []byte) cmdlineSecrets {
	t.Helper()
	s, err := seed.Parse(seedYAML)
	require.NoError(t, err)
	// The key the nodes issue with: the node CA's, or on an older seed
	// the root's own.
	block, _ := pem.Decode([]byte(s.PKI.NodeCAKey + s.PKI.CAKey))
	require.NotNil(t, block, "the seed carries a CA key")
	key := base64.StdEncoding.EncodeToString(block.Bytes)
	// Gzipped, as etcdbox seed --cmdline writes it: plain base64 of a
	// seed with a node CA is over the kernel's 2047 bytes.
	arg, err := seed.Cmdline(seedYAML)
	require.NoError(t, err)
	value := strings.TrimPrefix(arg, seed.CmdlineKey+"=")
	return cmdlineSecrets{
		arg: arg,
		markers: map[string]string{
			"the CA key":                         middle(key, 32),
			"the " + seed.CmdlineKey + "= value": middle(value, 32),
		},
	}
}

// middle is n characters from the middle of s.
func middle(s string, n int) string {
	i := (len(s) - n) / 2
	return s[i : i+n]
}

// kernelCmdlinePrint is a line in which the kernel prints its own command
// line, the one place the seed may show.
var kernelCmdlinePrint = regexp.MustCompile(`^\[\s*\d+\.\d+\] (Command line|Kernel command line|Unknown kernel command line parameters)`)

// assertAbsent checks that no line of text (from where) holds a secret,
// the kernel's own prints of its command line aside.
func (s cmdlineSecrets) assertAbsent(t *testing.T, where, text string) {
	t.Helper()
	for i, line := range strings.Split(text, "\n") {
		if kernelCmdlinePrint.MatchString(strings.TrimSpace(strings.TrimRight(line, "\r"))) {
			continue
		}
		for what, m := range s.markers {
			if strings.Contains(line, m) {
				assert.Failf(t, "a secret shows", "%s, line %d, holds %s: %.120q", where, i+1, what, line)
			}
		}
	}
}
