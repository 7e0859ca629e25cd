package rollout

import (
	"os"
	"testing"

	"github.com/etcdbox/etcdbox/internal/leakcheck"
)

// TestMain fails the package when a test leaks a goroutine of the etcd
// client or of gRPC (see leakcheck): EtcdClient wraps clientv3, and a
// rollout's sessions and watches must all be closed when it returns.
func TestMain(m *testing.M) { os.Exit(leakcheck.Run(m)) }
