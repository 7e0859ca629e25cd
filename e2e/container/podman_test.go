package container

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/image"
	"github.com/etcdbox/etcdbox/internal/testenv"
)

// runtime is the OCI runtime podman is asked to use. runc, not podman's
// default crun: crun refuses the hybrid cgroup layout (v1 controllers
// with a v2 mount) some of these machines have, and runc runs on every
// layout. hack/deps.sh installs both podman and runc.
const runtime = "runc"

// podman runs podman with args and returns its standard output; a
// failure carries its standard error.
func podman(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "podman", append([]string{"--runtime", runtime}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// mustPodman is podman that fails the test on an error.
func mustPodman(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := podman(ctx, args...)
	require.NoError(t, err)
	return out
}

// requirePodman skips outside make test's environment: podman needs root
// here (CI runs make test as root, and hack/deps.sh installs podman).
func requirePodman(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("container tier: runs in make test, not in go test -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for podman (make test runs as root)")
	}
	for _, tool := range []string{"podman", runtime} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "%s is missing: hack/deps.sh installs it", tool)
	}
}

// loadedRef matches the name podman load reports.
var loadedRef = regexp.MustCompile(`Loaded image(?:\(s\))?: (\S+)`)

// loadImage builds the OCI image (build --format oci, a tarball) from
// the prebuilt init and etcd, loads it into podman's store under a
// version of its own, and removes it when the test ends.
func loadImage(t *testing.T) string {
	t.Helper()
	vmlinuz, modules := testenv.Kernel(t)
	tar := filepath.Join(t.TempDir(), "etcdbox.oci.tar")
	version := "ctest-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, err := image.Build(context.Background(), image.Config{
		Kernel: vmlinuz, Modules: modules,
		Init:   testenv.Bin(t, "init"), // and its own etcd
		Format: image.FormatOCI, Output: tar, Version: version,
		Compression: image.CompressionFast, // a container does not unpack an initrd
	})
	require.NoError(t, err)
	out := mustPodman(t, "load", "--input", tar)
	m := loadedRef.FindStringSubmatch(out)
	require.NotNil(t, m, "podman load named no image: %s", out)
	ref := m[1]
	require.Contains(t, ref, version, "podman loaded another image than the one built")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := podman(ctx, "rmi", "--force", ref); err != nil {
			t.Logf("remove the image: %v", err)
		}
	})
	return ref
}

// ulimits are podman's --ulimit flags for this machine. Without them
// podman asks for more open files and processes than root's hard limits
// here, and root has no CAP_SYS_RESOURCE to raise them, so the runtime
// fails with "setrlimit: operation not permitted". The container gets the
// test's own hard limits, and no more processes than pid_max allows.
func ulimits(t *testing.T) []string {
	t.Helper()
	var nofile, nproc syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile))
	require.NoError(t, syscall.Getrlimit(rlimitNproc, &nproc))
	procs := nproc.Max
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if pidMax, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			procs = min(procs, pidMax)
		}
	}
	return []string{
		"--ulimit", fmt.Sprintf("nofile=%d:%d", nofile.Max, nofile.Max),
		"--ulimit", fmt.Sprintf("nproc=%d:%d", procs, procs),
	}
}

// rlimitNproc is RLIMIT_NPROC, which package syscall does not name.
const rlimitNproc = 6
