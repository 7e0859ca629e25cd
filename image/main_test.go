package image

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdbox/etcdbox/internal/testenv"
)

// scratch holds outputs shared by the tests of this package; TestMain
// removes it.
var scratch string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "etcdbox-image-test-")
	if err != nil {
		panic(err)
	}
	scratch = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testEpoch is the SOURCE_DATE_EPOCH of the test builds (2023-11-14).
const testEpoch = 1700000000

// initBin returns bin/init (make build), which the builder copies to /init.
func initBin(t testing.TB) string {
	t.Helper()
	return testenv.Bin(t, "init")
}

var snapshots struct {
	sync.Mutex
	m map[string]string
}

// snapshot copies src into the scratch directory once and returns the
// copy: `make build` may rewrite bin/ while the tests run, and the tests
// compare outputs of several builds with each other and with the inputs.
func snapshot(t testing.TB, src string) string {
	t.Helper()
	snapshots.Lock()
	defer snapshots.Unlock()
	if p, ok := snapshots.m[src]; ok {
		return p
	}
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	dst := filepath.Join(scratch, "inputs", filepath.Base(src))
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, data, 0o755))
	if snapshots.m == nil {
		snapshots.m = map[string]string{}
	}
	snapshots.m[src] = dst
	return dst
}

// testConfig returns a Config built from the real cached inputs, with
// the init's own etcd (no Etcd), as etcdbox build makes by default.
func testConfig(t testing.TB) Config {
	t.Helper()
	vmlinuz, modules := testenv.Kernel(t)
	return Config{
		Kernel:          vmlinuz,
		Modules:         modules,
		Init:            snapshot(t, initBin(t)),
		Bootloader:      testenv.Bootloader(t),
		Cmdline:         "etcdbox.debug=1",
		SourceDateEpoch: testEpoch,
		Version:         "test",
		CacheDir:        testenv.InitrdCache(t),
	}
}

// A built is an image built once and shared by several tests.
type built struct {
	once sync.Once
	path string
	res  *Result
	err  error
}

var rawBuild, ociBuild built

// get builds the image the first time it is asked for.
func (b *built) get(t *testing.T, name string, format Format) (string, *Result) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a full image; runs without -short (make test)")
	}
	b.once.Do(func() {
		cfg := testConfig(t)
		cfg.Format, cfg.Output = format, filepath.Join(scratch, name)
		b.path = cfg.Output
		b.res, b.err = Build(context.Background(), cfg)
	})
	require.NoError(t, b.err, "build %s", name)
	return b.path, b.res
}

// rawImage returns the shared raw disk image.
func rawImage(t *testing.T) (string, *Result) { return rawBuild.get(t, "disk.img", FormatRaw) }

// ociLayout returns the shared OCI image layout.
func ociLayout(t *testing.T) (string, *Result) { return ociBuild.get(t, "oci", FormatOCI) }
