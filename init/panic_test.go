package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestContainerSurvivesPanics runs a one-node init whose long-lived parts
// each panic once at their start (the test hooks' ETCDBOX_TEST_PANIC): the
// init survives every one, each part runs again, etcd serves, and the
// shutdown handler, itself restarted, still stops the node cleanly. A
// panic in a required boot step takes the fatal path, with the step named.
func TestContainerSurvivesPanics(t *testing.T) {
	c := newCluster(t, "n1", "n2")
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	c.writeSeed(n1, "panics", 1, "n1")
	c.writeSeed(n2, "panics", 1, "n2")

	t.Run("long-lived parts run again", func(t *testing.T) {
		n1.bin = buildInitHooks(t)
		n1.env = []string{"ETCDBOX_TEST_PANIC=member lifecycle,ready watch,shutdown handler"}
		n1.start()
		for _, part := range []string{"member lifecycle", "ready watch", "shutdown handler"} {
			at := n1.waitLog(0, "panic in "+part+": test hook: "+part+" panics once (recovered)", 30*time.Second)
			n1.waitLog(at, part+": running it again in", 10*time.Second)
		}
		n1.waitLog(0, "is a voting member", 60*time.Second)
		n1.waitLog(0, "etcd ready", 60*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.client(n1).Put(ctx, "survived", "yes")
		require.NoError(t, err)
		from := len(n1.log())
		n1.stop()
		select {
		case <-n1.done:
		default:
			t.Fatal("the init did not exit on SIGTERM")
		}
		assert.Contains(t, n1.log()[from:], "shutdown complete", "the restarted shutdown handler stopped the node")
		assert.Equal(t, 0, n1.proc.Status().Code)
	})

	t.Run("a required boot step that panics is fatal, and named", func(t *testing.T) {
		n2.bin = buildInitHooks(t)
		n2.env = []string{`ETCDBOX_TEST_PANIC=boot step "issue certificates"`}
		n2.start()
		select {
		case <-n2.done:
		case <-time.After(30 * time.Second):
			t.Fatal("the init did not exit after a fatal boot step")
		}
		assert.Equal(t, 1, n2.proc.Status().Code)
		log := n2.log()
		assert.Contains(t, log, `panic in boot step "issue certificates": test hook`)
		assert.Contains(t, log, `fatal: issue certificates: boot step "issue certificates" panicked`)
	})
}
