package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/rollout"
)

// TestSingleNode boots one node, an Intel board's, and walks it through
// an operator's day: TLS-only service, refusals, leaves renewed under a
// client, an etcd crash, a hang that its watchdog resets, a power-off and
// a second boot, checking the data each time. Its seed (a cidata volume)
// gives leaves of 30 s.
func TestSingleNode(t *testing.T) {
	// One VM, after the cluster tests (e2e/schedule_test.go).
	oneVMTest(t, lanePower)
	pkiDir, img := fixture(t)
	n := newNode(t, img)
	n.cfg.ExtraDisks = []string{shortLeavesVolume(t, pkiDir)}
	// An Intel board's: q35 without the i6300esb every other VM has, so
	// the only watchdog is the ICH9 chipset's TCO, whose device lpc_ich
	// adds, so that iTCO_wdt loads only in the coldplug.
	n.cfg.NoWatchdog = true
	n.boot(t)
	n.wait(t, 0, "etcdbox: etcd ready", bootDeadline)
	mark, etcdStart := n.vm.Mark(), etcdStartTime(t, n, pkiDir)
	rw := watchRenewals(t, n, pkiDir)

	t.Run("the chipset's watchdog is armed after the drivers", func(t *testing.T) {
		con := n.vm.Console()
		mods := strings.Index(con, "etcdbox: load kernel modules: done")
		require.Positive(t, mods, "no module step on the console")
		early := con[:mods]
		assert.Contains(t, early, "etcdbox: arm watchdog: no hardware watchdog", "no watchdog before the coldplug")
		assert.Regexp(t, `etcdbox: modules: loaded [0-9]+: .*\biTCO_wdt\b`, early, "the coldplug loaded iTCO_wdt")
		assert.Regexp(t, `etcdbox: watchdog /dev/watchdog armed: .*\(iTCO_wdt\)`, con[mods:], "armed after the coldplug")
		st, err := n.api(t, pkiDir).Status(t.Context())
		require.NoError(t, err)
		assert.Regexp(t, `^/dev/watchdog \(iTCO_wdt\), timeout [0-9]+s$`, st.Watchdog, "the node API names the watchdog")
	})

	t.Run("put and get over mutual TLS", func(t *testing.T) {
		out, err := testenv.Etcdctl(t, pkiDir, n.endpoint(), "put", "k1", "v1")
		require.NoError(t, err, out)
		out, err = testenv.Etcdctl(t, pkiDir, n.endpoint(), "get", "k1", "--print-value-only")
		require.NoError(t, err, out)
		assert.Equal(t, "v1", out)
	})

	t.Run("refusals", func(t *testing.T) {
		// etcd's HTTP endpoints have a port of their own; the client port
		// serves gRPC alone, where a GET of /health is no etcd answer.
		port := n.vm.HostPort(httpPort)
		caPool := x509.NewCertPool()
		caPEM, err := os.ReadFile(filepath.Join(pkiDir, "ca.crt"))
		require.NoError(t, err)
		require.True(t, caPool.AppendCertsFromPEM(caPEM))
		get := func(c *http.Client, url string) error {
			resp, err := c.Get(url)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				return fmt.Errorf("status %s", resp.Status)
			}
			return err
		}
		plain := &http.Client{Timeout: 10 * time.Second}
		assert.Error(t, get(plain, fmt.Sprintf("http://127.0.0.1:%d/health", port)), "plain http must fail")

		noCert := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool}}}
		assert.Error(t, get(noCert, fmt.Sprintf("https://127.0.0.1:%d/health", port)), "TLS without a client certificate must fail")

		other, err := pki.NewCA("other", time.Hour)
		require.NoError(t, err)
		certPEM, keyPEM, err := other.Issue(pki.Leaf{CommonName: "intruder", Client: true, Validity: time.Hour})
		require.NoError(t, err)
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		require.NoError(t, err)
		foreign := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool, Certificates: []tls.Certificate{cert}}}}
		assert.Error(t, get(foreign, fmt.Sprintf("https://127.0.0.1:%d/health", port)), "a certificate from another CA must fail")

		// The same request with the admin certificate works, so the
		// failures above are the refusals and not a dead port.
		admin, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, "admin.crt"), filepath.Join(pkiDir, "admin.key"))
		require.NoError(t, err)
		good := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool, Certificates: []tls.Certificate{admin}}}}
		assert.NoError(t, get(good, fmt.Sprintf("https://127.0.0.1:%d/health", port)))
		assert.Error(t, get(good, fmt.Sprintf("https://127.0.0.1:%d/health", n.vm.HostPort(clientPort))), "the client port serves gRPC alone")
		// The client port refuses the same certificates.
		for what, c := range map[string]*http.Client{"no client certificate": noCert, "another CA's": foreign} {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.endpoint()}, TLS: c.Transport.(*http.Transport).TLSClientConfig, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err = cli.Get(ctx, "k1")
				cancel()
				cli.Close()
			}
			assert.Error(t, err, "a get on the client port with %s", what)
		}
	})

	t.Run("leaves renewed three times under a client: no failed request, etcd never restarts", func(t *testing.T) {
		testRenewal(t, n, pkiDir, rw, mark, etcdStart)
	})

	t.Run("etcd killed with SIGKILL comes back", func(t *testing.T) {
		from := n.vm.Mark()
		url := fmt.Sprintf("http://127.0.0.1:%d/hook/kill-etcd", n.vm.HostPort(hookPort))
		resp, err := http.Post(url, "", nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		m := n.wait(t, from, "etcdbox: etcd exited", time.Minute)
		assert.Contains(t, m.Line, "killed")
		n.wait(t, m.Next, "etcdbox: etcd ready", 2*time.Minute)
		out, err := testenv.Etcdctl(t, pkiDir, n.endpoint(), "get", "k1", "--print-value-only")
		require.NoError(t, err, out)
		assert.Equal(t, "v1", out)
	})

	// A loop of the init that hangs (a test hook): the watchdog is no
	// longer fed, and the chipset's TCO resets the machine, with no
	// shutdown, reboot or panic in between; the data survives the reset.
	t.Run("a hang is reset by the chipset's watchdog, and the data survives", func(t *testing.T) {
		out, err := testenv.Etcdctl(t, pkiDir, n.endpoint(), "put", "k2", "v2")
		require.NoError(t, err, out)
		from := n.vm.Mark()
		resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/hook/hang", n.vm.HostPort(hookPort)), "", nil)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
		stall := n.wait(t, from, "etcdbox: watchdog: not feeding", time.Minute)
		next := n.wait(t, stall.Next, "Command line: ", 2*time.Minute)
		between := n.vm.Console()[stall.Next:next.Offset]
		for _, s := range []string{"shutdown", "reboot:", "Kernel panic"} {
			assert.NotContains(t, between, s, "between the hang and the next boot: only the watchdog's reset")
		}
		m := n.wait(t, next.Next, "etcdbox: etcd: restarting member", bootDeadline)
		n.wait(t, m.Next, "etcdbox: etcd ready", bootDeadline)
		out, err = testenv.Etcdctl(t, pkiDir, n.endpoint(), "get", "k2", "--print-value-only")
		require.NoError(t, err, out)
		assert.Equal(t, "v2", out)
	})

	t.Run("power button stops etcd cleanly, and data survives power-off", func(t *testing.T) {
		out, err := testenv.Etcdctl(t, pkiDir, n.endpoint(), "put", "k3", "v3")
		require.NoError(t, err, out)
		from := n.vm.Mark()
		n.powerOff(t, 90*time.Second)
		log := n.vm.Console()[from:]
		assert.Contains(t, log, "etcdbox: etcd stopped in ")
		// Within its time: never the timeout's SIGKILL. The init may end
		// etcd once its WAL and database are closed (init/etcdstop.go,
		// "done with what matters"); that is a clean stop.
		assert.NotContains(t, log, "after SIGTERM; sending SIGKILL")
		assert.NotContains(t, log, "without exiting on SIGTERM")

		n.boot(t)
		n.wait(t, 0, "etcdbox: etcd ready", bootDeadline)
		out, err = testenv.Etcdctl(t, pkiDir, n.endpoint(), "get", "k", "--prefix", "--print-value-only")
		require.NoError(t, err, out)
		assert.Equal(t, "v1\nv2\nv3", out)
		// A clean stop leaves nothing for etcd to repair.
		assert.NotContains(t, strings.ToLower(n.vm.Console()), "repair")
	})

	// The fixture's seed gives etcd the smallest quota (64 MiB): one key
	// overwritten with 1 MiB values fills it with history until NOSPACE;
	// maintain (compact, defrag, disarm) makes the node writable again
	// with every key kept.
	t.Run("NOSPACE: filled, refused, maintained", func(t *testing.T) {
		tc, err := nodeapi.AdminTLS(pkiDir)
		require.NoError(t, err)
		cli, err := rollout.Dial([]string{n.endpoint()}, tc)
		require.NoError(t, err)
		defer cli.Close()
		ctx := t.Context()
		// The write that raises NOSPACE is refused with it, yet etcd
		// applies it (its quota applier checks, applies, then reports):
		// an error leaves a write's outcome open, so the key holds the
		// last acknowledged value or that one.
		var last, refused []byte
		filled := false
		for i := 0; !filled; i++ {
			require.Less(t, i, 200, "no NOSPACE after %d writes of 1 MiB", i)
			v := bytes.Repeat([]byte{byte('a' + i%26)}, 1<<20)
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := cli.Put(wctx, "fill", string(v))
			cancel()
			switch {
			case err == nil:
				last = v
			case strings.Contains(err.Error(), rpctypes.ErrNoSpace.Error()):
				filled, refused = true, v
				t.Logf("NOSPACE after %d writes of 1 MiB", i)
			default:
				require.NoError(t, err, "write %d", i)
			}
		}
		_, err = cli.Put(ctx, "k4", "v4")
		require.ErrorContains(t, err, rpctypes.ErrNoSpace.Error(), "the full node refuses writes")
		st, err := n.api(t, pkiDir).Status(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, st.Member.Alarms, "the node reports the alarm")
		assert.Contains(t, st.Member.Alarms[0], "NOSPACE")

		m := &rollout.Maintenance{Client: cli, Endpoints: []string{n.endpoint()}, Logf: t.Logf}
		start := time.Now()
		require.NoError(t, m.Maintain(ctx))
		t.Logf("maintain took %s", time.Since(start).Round(time.Millisecond))
		_, err = cli.Put(ctx, "k4", "v4")
		require.NoError(t, err, "writes are accepted again")
		r, err := cli.Get(ctx, "fill")
		require.NoError(t, err)
		require.Len(t, r.Kvs, 1)
		assert.True(t, bytes.Equal(last, r.Kvs[0].Value) || bytes.Equal(refused, r.Kvs[0].Value),
			"the filled key keeps its last acknowledged value, or the refused write's (value %q...)", r.Kvs[0].Value[:1])
		out, err := testenv.Etcdctl(t, pkiDir, n.endpoint(), "get", "k", "--prefix", "--print-value-only")
		require.NoError(t, err, out)
		assert.Equal(t, "v1\nv2\nv3\nv4", out)
	})

	// A CPU model without RDRAND (qemu64), as some hypervisors and older
	// libvirt models give: with a virtio-rng device the node comes up as
	// usual; without one, the init says what it waits for instead of
	// going quiet.
	t.Run("no RDRAND, with an RNG device", func(t *testing.T) {
		n.powerOff(t, 90*time.Second)
		n.cfg.CPU = "qemu64"
		n.boot(t)
		n.wait(t, 0, "etcdbox: etcd ready", bootDeadline)
		out, err := testenv.Etcdctl(t, pkiDir, n.endpoint(), "get", "k1", "--print-value-only")
		require.NoError(t, err, out)
		assert.Equal(t, "v1", out)
		assert.Contains(t, n.vm.Console(), "virtio_rng", "the RNG driver was not loaded")
	})

	t.Run("no RDRAND and no RNG device", func(t *testing.T) {
		n.powerOff(t, 90*time.Second)
		n.cfg.CPU, n.cfg.NoRNG = "qemu64", true
		n.boot(t)
		start := n.wait(t, 0, "etcdbox: ", bootDeadline)
		began := time.Now()
		m := n.wait(t, start.Next, "etcdbox: "+entropyLine, 30*time.Second)
		t.Logf("the entropy line came %s after the init's first line: %s", time.Since(began).Round(10*time.Millisecond), m.Line)
		assert.NotContains(t, n.vm.Console()[:m.Next], "unable to receive an offer", "DHCP ran before the pool was ready")
	})
}

// entropyLine is what the init prints while the kernel's random pool is
// not ready (init/entropy.go).
const entropyLine = "waiting for the kernel's random number generator (no RDRAND, no RNG device)"
