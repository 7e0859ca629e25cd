package seed

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWithoutSeed(t *testing.T) {
	for in, want := range map[string]string{
		"":                                      "",
		"console=ttyS0 etcdbox.slot=a panic=10": "console=ttyS0 etcdbox.slot=a panic=10",
		"console=ttyS0 etcdbox.seed=c2VjcmV0 quiet": "console=ttyS0 quiet",
		`a "etcdbox.seed=c2VjcmV0" b`:               "a b",
		"etcdbox.seed=x etcdbox.seed=y":             "",
		"etcdbox.seeds=1 xetcdbox.seed=2":           "etcdbox.seeds=1 xetcdbox.seed=2",
	} {
		assert.Equal(t, want, WithoutSeed(in), "WithoutSeed(%q)", in)
	}
}
