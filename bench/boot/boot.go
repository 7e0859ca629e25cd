package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/etcdbox/etcdbox/qemu"
)

// clientPort is etcd's client port inside the guest.
const clientPort = 2379

// Console lines that split a boot into phases, the same for both images:
// the EFI stub prints the first (through the firmware's serial console)
// before the kernel proper starts, so everything before it is firmware
// and systemd-boot; the kernel prints the second as it starts /init, so
// everything after it is the init and etcd.
const (
	kernelMarker = "EFI stub:"
	initMarker   = "Run /init as init process"
)

// readyRSS matches the suffix the etcdbox init appends to its
// "etcdbox: etcd ready (...)" console line.
var readyRSS = regexp.MustCompile(`init rss (\d+) KiB`)

// readyPSS matches the proportional set size in the same line's parts
// ("; pss N"): the init's share of the pages it maps, halving those etcd
// maps too (they run from the same file).
var readyPSS = regexp.MustCompile(`; pss (\d+)\)`)

// variant is one of the images a run compares.
type variant struct {
	name   string
	image  string
	scheme string      // of the client URL: "https" or "http"
	tls    *tls.Config // nil for plain http
	fatal  []string    // console lines that end a boot early
	ready  string      // console marker whose line carries the init rss; "" for none
}

// sample is what one boot measured.
type sample struct {
	variant string
	round   int
	kernel  time.Duration // QEMU start to kernelMarker; 0 when not seen
	init    time.Duration // QEMU start to initMarker; 0 when not seen
	healthy time.Duration // QEMU start to the first successful read
	rssKiB  int64         // init's VmRSS at "etcd ready"; -1 when not printed
	pssKiB  int64         // init's Pss at "etcd ready"; -1 when not printed
	err     error
}

// variants returns ours (mutual TLS with the admin certificate) and the
// floor (plain http), in boot order.
func variants(im images) ([]variant, error) {
	admin, err := tls.LoadX509KeyPair(filepath.Join(im.pkiDir, "admin.crt"), filepath.Join(im.pkiDir, "admin.key"))
	if err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(im.pkiDir, "ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("cluster CA %s: no certificate", filepath.Join(im.pkiDir, "ca.crt"))
	}
	ours := variant{
		name: "ours", image: im.ours, scheme: "https",
		tls:   &tls.Config{Certificates: []tls.Certificate{admin}, RootCAs: roots, MinVersion: tls.VersionTLS13},
		fatal: []string{"etcdbox: fatal:", "etcdbox: seed error:"},
		ready: "etcdbox: etcd ready",
	}
	nometa := ours
	nometa.name, nometa.image = "nometa", im.nometa
	return []variant{ours, {name: "floor", image: im.floor, scheme: "http", fatal: []string{"floorinit: fatal:"}}, nometa}, nil
}

// boot starts v's image on a fresh overlay in dir, times it to a
// successful linearizable read, reads the init's rss from the console,
// and stops QEMU. The clock starts when qemu.Start is called (overlay and
// UEFI variables included, a few milliseconds alike for both).
func (o options) boot(ctx context.Context, v variant, round int, dir string) sample {
	s := sample{variant: v.name, round: round, rssKiB: -1, pssKiB: -1}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	code := filepath.Join(o.sysroot, "usr/share/OVMF/OVMF_CODE_4M.fd")
	vars := filepath.Join(o.sysroot, "usr/share/OVMF/OVMF_VARS_4M.fd")
	start := time.Now()
	vm, err := qemu.Start(ctx, qemu.Config{
		Name: v.name, Dir: dir, Image: v.image, Overlay: true,
		OVMFCode: code, OVMFVars: vars, MemoryMiB: o.memoryMiB, CPUs: o.cpus,
		Forwards: []qemu.Forward{{GuestPort: clientPort}},
	})
	if err != nil {
		s.err = err
		return s
	}
	defer stop(vm)

	// Markers are seen within WaitConsole's poll interval (100 ms).
	kernelAt, initAt := make(chan time.Duration, 1), make(chan time.Duration, 1)
	for marker, seen := range map[string]chan time.Duration{kernelMarker: kernelAt, initMarker: initAt} {
		go func() {
			if _, err := vm.WaitConsole(ctx, 0, marker); err == nil {
				seen <- time.Since(start)
			}
		}()
	}
	// A fatal console line or QEMU's exit ends the wait for a read.
	probeCtx, stopProbe := context.WithCancelCause(ctx)
	defer stopProbe(nil)
	go func() {
		m, err := vm.WaitConsole(probeCtx, 0, v.fatal...)
		switch {
		case err == nil:
			stopProbe(fmt.Errorf("console: %s", m.Line))
		case errors.Is(err, qemu.ErrExited):
			stopProbe(qemu.ErrExited)
		}
	}()
	endpoint := fmt.Sprintf("%s://127.0.0.1:%d", v.scheme, vm.HostPort(clientPort))
	at, err := waitRead(probeCtx, endpoint, v.tls, o.poll)
	if err != nil {
		// A fatal line or QEMU's exit says more than "context canceled";
		// a deadline keeps the last attempt's error.
		if cause := context.Cause(probeCtx); cause != nil && !errors.Is(cause, context.Canceled) && !errors.Is(cause, context.DeadlineExceeded) {
			err = cause
		}
		s.err = fmt.Errorf("%s boot %d: no read from %s: %w\nconsole tail:\n%s", v.name, round, endpoint, err, vm.ConsoleTail(30))
		return s
	}
	s.healthy = at.Sub(start)
	for _, m := range []struct {
		seen chan time.Duration
		d    *time.Duration
	}{{kernelAt, &s.kernel}, {initAt, &s.init}} {
		select {
		case *m.d = <-m.seen:
		default:
		}
	}
	if v.ready != "" {
		// The init probes every 500 ms, so its marker may come just
		// after our first read.
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if m, err := vm.WaitConsole(rctx, 0, v.ready); err == nil {
			if sub := readyRSS.FindStringSubmatch(m.Line); sub != nil {
				s.rssKiB, _ = strconv.ParseInt(sub[1], 10, 64)
			}
			if sub := readyPSS.FindStringSubmatch(m.Line); sub != nil {
				s.pssKiB, _ = strconv.ParseInt(sub[1], 10, 64)
			}
		}
	}
	return s
}

// stop makes QEMU exit at once: the disk is a throwaway overlay, and a
// graceful power-off is not what is measured.
func stop(vm *qemu.VM) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := vm.Quit(ctx); err != nil || vm.Wait(ctx) != nil {
		vm.Kill()
		vm.Wait(ctx)
	}
}
