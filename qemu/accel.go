package qemu

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Binaries; tests and users put other versions first in PATH.
const (
	qemuBinary = "qemu-system-x86_64"
	imgBinary  = "qemu-img"
)

// Accelerators, and "auto": KVM when a test guest proves it runs code.
const (
	AccelAuto = "auto"
	AccelKVM  = "kvm"
	AccelTCG  = "tcg"
)

// AccelEnv names the environment variable that sets the accelerator
// (auto, kvm or tcg) wherever the harness starts VMs: the CLI, the tests,
// make bench and make cluster. A flag, where there is one, wins.
const AccelEnv = "ETCDBOX_ACCEL"

// DefaultProbeTimeout bounds the probe's test guest. Under working KVM
// the kernel reaches its panic in well under a second, under TCG in
// about 2.5 s; a host whose KVM guests never run makes the probe wait
// this long once per host boot.
const DefaultProbeTimeout = 8 * time.Second

// Choice is an accelerator and why it was chosen.
type Choice struct {
	Accel  string `json:"accel"`
	Reason string `json:"reason"`
	// Probed reports whether a test guest ran for this answer (false
	// when it came from a flag, the environment or the cache).
	Probed bool `json:"-"`
	// Took is how long the probe ran (zero when it did not).
	Took time.Duration `json:"took"`
}

// String is the line the harness prints: "accelerator: tcg (kvm opened,
// but a test guest did not run within 8s)".
func (c Choice) String() string { return "accelerator: " + c.Accel + " (" + c.Reason + ")" }

// Prober decides whether KVM runs guests on this host. A paused QEMU that
// quits cleanly, or a few bytes of real-mode code, prove nothing: on some
// hosts /dev/kvm opens and such probes pass, yet the Linux kernel hangs
// around its switch out of real mode and the guest never gets further.
// So the probe takes the path a real guest takes: it boots a real kernel
// under KVM with no root, panic=-1 and -no-reboot, and KVM works when the
// kernel reaches its panic within the timeout (QEMU then exits by itself).
//
// The answer is cached per host boot (the kernel's boot_id), so that only
// the first command after a boot pays for the probe.
type Prober struct {
	// Binary is QEMU; default qemu-system-x86_64 from PATH.
	Binary string
	// Kernel is the kernel the test guest boots; default FindKernel.
	Kernel string
	// Device is the KVM device; default /dev/kvm.
	Device string
	// Timeout bounds the test guest; default DefaultProbeTimeout.
	Timeout time.Duration
	// CacheFile keeps the answer; default <user cache dir>/etcdbox/accel.json.
	// "-" disables the cache.
	CacheFile string
	// BootIDFile names this host boot; default /proc/sys/kernel/random/boot_id.
	BootIDFile string

	// tcg boots the test guest under TCG instead, for tests that check
	// the kernel itself boots.
	tcg bool
}

// cacheEntry is the cached answer of one host boot.
type cacheEntry struct {
	BootID string `json:"bootID"`
	Binary string `json:"binary"`
	Choice
}

// Probe returns KVM when a test guest runs under it, else TCG with the
// reason, from the cache when this host boot already has an answer.
func (p Prober) Probe(ctx context.Context) Choice {
	p = p.withDefaults()
	bootID := p.bootID()
	if c, ok := p.cached(bootID); ok {
		c.Reason += ", cached for this host boot"
		return c
	}
	c := p.probe(ctx)
	if ctx.Err() == nil { // an interrupted probe proves nothing
		p.store(bootID, c)
	}
	return c
}

func (p Prober) withDefaults() Prober {
	if p.Binary == "" {
		p.Binary = qemuBinary
	}
	if p.Kernel == "" {
		p.Kernel = FindKernel()
	}
	if p.Device == "" {
		p.Device = "/dev/kvm"
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultProbeTimeout
	}
	if p.CacheFile == "" {
		if d, err := os.UserCacheDir(); err == nil {
			p.CacheFile = filepath.Join(d, "etcdbox", "accel.json")
		} else {
			p.CacheFile = "-"
		}
	}
	if p.BootIDFile == "" {
		p.BootIDFile = "/proc/sys/kernel/random/boot_id"
	}
	return p
}

// probe runs the test guest; it never consults the cache.
func (p Prober) probe(ctx context.Context) Choice {
	tcg := func(format string, args ...any) Choice {
		return Choice{Accel: AccelTCG, Reason: fmt.Sprintf(format, args...), Probed: true}
	}
	// The tcg test boot needs no device: it proves the fallback runs.
	if !p.tcg {
		f, err := os.OpenFile(p.Device, os.O_RDWR, 0)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return tcg("no %s", p.Device)
			}
			return tcg("%s does not open: %v", p.Device, errors.Unwrap(err))
		}
		f.Close()
	}
	if p.Kernel == "" {
		return tcg("kvm opened, but there is no kernel to prove it runs a guest (run hack/deps.sh, or set %s=kvm)", AccelEnv)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	accel, cpu := "kvm", "host"
	if p.tcg {
		accel, cpu = "tcg", "max"
	}
	cmd := exec.CommandContext(ctx, p.Binary,
		"-accel", accel, "-cpu", cpu, "-machine", "q35", "-m", "256",
		"-no-user-config", "-nodefaults", "-display", "none", "-no-reboot",
		"-serial", "stdio", "-kernel", p.Kernel,
		"-append", "console=ttyS0 panic=-1 loglevel=4")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	took := time.Since(start)
	ran := strings.Contains(out.String(), "Kernel panic")
	switch {
	case ran && err == nil:
		return Choice{Accel: accel, Reason: fmt.Sprintf("a test guest ran under %s and reached its kernel panic in %s", accel, took.Round(10*time.Millisecond)), Probed: true, Took: took}
	case ctx.Err() != nil:
		c := tcg("kvm opened, but a test guest did not run within %s", p.Timeout)
		c.Took = took
		return c
	default:
		c := tcg("kvm opened, but the test guest failed: %v: %s", err, lastLine(out.String()))
		c.Took = took
		return c
	}
}

// lastLine is the last non-empty line of s, for one-line reasons.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return Printable(strings.TrimSpace(lines[len(lines)-1]))
}

func (p Prober) bootID() string {
	b, err := os.ReadFile(p.BootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (p Prober) cached(bootID string) (Choice, bool) {
	if p.CacheFile == "-" || bootID == "" {
		return Choice{}, false
	}
	b, err := os.ReadFile(p.CacheFile)
	if err != nil {
		return Choice{}, false
	}
	var e cacheEntry
	if json.Unmarshal(b, &e) != nil || e.BootID != bootID || e.Binary != p.Binary {
		return Choice{}, false
	}
	if e.Accel != AccelKVM && e.Accel != AccelTCG {
		return Choice{}, false
	}
	return e.Choice, true
}

// store writes the answer atomically; a cache that cannot be written
// only costs the next command a probe.
func (p Prober) store(bootID string, c Choice) {
	if p.CacheFile == "-" || bootID == "" {
		return
	}
	b, err := json.Marshal(cacheEntry{BootID: bootID, Binary: p.Binary, Choice: c})
	if err != nil {
		return
	}
	if os.MkdirAll(filepath.Dir(p.CacheFile), 0o755) != nil {
		return
	}
	tmp := p.CacheFile + ".tmp"
	if os.WriteFile(tmp, b, 0o644) == nil {
		os.Rename(tmp, p.CacheFile)
	}
}

// FindKernel returns a kernel for the probe's test guest: the newest
// vmlinuz in the dependency cache that hack/deps.sh fills ($ETCDBOX_CACHE,
// or .cache/sysroot/boot in a parent of the working directory or of this
// program), else the host's newest /boot/vmlinuz-*; "" when there is none.
func FindKernel() string {
	var dirs []string
	if c := os.Getenv("ETCDBOX_CACHE"); c != "" {
		dirs = append(dirs, filepath.Join(c, "sysroot", "boot"))
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, s := range starts {
		for d := s; ; d = filepath.Dir(d) {
			dirs = append(dirs, filepath.Join(d, ".cache", "sysroot", "boot"))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	dirs = append(dirs, "/boot")
	for _, d := range dirs {
		m, _ := filepath.Glob(filepath.Join(d, "vmlinuz-*"))
		if len(m) > 0 {
			sort.Strings(m)
			return m[len(m)-1]
		}
	}
	return ""
}

// ChooseAccel returns the accelerator for flag (auto, kvm, tcg or ""):
// the flag when it names one, else $ETCDBOX_ACCEL when it does, else the
// probe's answer. A value that is none of these is an error naming it.
func ChooseAccel(ctx context.Context, flag string) (Choice, error) {
	return chooseAccel(ctx, flag, os.Getenv(AccelEnv), func(ctx context.Context) Choice { return probeOnce(ctx) })
}

func chooseAccel(ctx context.Context, flag, env string, probe func(context.Context) Choice) (Choice, error) {
	for _, src := range []struct{ name, value string }{{"accel", flag}, {AccelEnv, env}} {
		switch src.value {
		case "", AccelAuto:
			continue
		case AccelKVM, AccelTCG:
			how := "--accel " + src.value
			if src.name == AccelEnv {
				how = AccelEnv + "=" + src.value
			}
			return Choice{Accel: src.value, Reason: "set by " + how}, nil
		default:
			return Choice{}, fmt.Errorf("%s %q: want auto, kvm or tcg", src.name, src.value)
		}
	}
	return probe(ctx), nil
}

// probeOnce probes once per process (and, through the cache, once per
// host boot).
var probeOnce = func() func(context.Context) Choice {
	var (
		mu   sync.Mutex
		done bool
		c    Choice
	)
	return func(ctx context.Context) Choice {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			c = Prober{}.Probe(ctx)
			done = ctx.Err() == nil
		}
		return c
	}
}()

// Accel returns the accelerator Start uses when Config.Accel is empty:
// $ETCDBOX_ACCEL when it is kvm or tcg, else the probe's answer ("tcg"
// also when $ETCDBOX_ACCEL is not a valid value; Start reports that).
func Accel() string {
	c, err := ChooseAccel(context.Background(), "")
	if err != nil {
		return AccelTCG
	}
	return c.Accel
}
