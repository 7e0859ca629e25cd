package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"

	"github.com/etcdbox/etcdbox/qemu"
)

// Down presses every VM's ACPI power button, so that etcd stops cleanly,
// and gives each up to grace to power off before QEMU is stopped by force
// (which is reported, not an error); then it stops the network. It keeps
// the disks, the CA and state.json, so that Up resumes the cluster, and
// removes etcdctl.env, whose ports are gone. When a VM cannot be stopped
// the network stays up and Down can be run again.
func (c *Cluster) Down(ctx context.Context, grace time.Duration) error {
	unlock, err := lockDir(c.cfg.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	var (
		mu   sync.Mutex
		errs *multierror.Error
		wg   sync.WaitGroup
	)
	for _, n := range c.st.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vm, err := c.VM(n.Name)
			if errors.Is(err, qemu.ErrNotRunning) {
				c.cfg.Log("%s: not running", n.Name)
				return
			}
			if err == nil {
				c.cfg.Log("%s: pressing the power button (pid %d, up to %s)", n.Name, vm.PID(), grace)
				err = c.stopVM(ctx, vm, grace)
			}
			switch {
			case err == nil:
				c.cfg.Log("%s: powered off", n.Name)
			case errors.Is(err, qemu.ErrForced):
				c.cfg.Log("%v; console: %s", err, n.Console)
			default:
				mu.Lock()
				errs = multierror.Append(errs, fmt.Errorf("%s: %w", n.Name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errs.ErrorOrNil(); err != nil {
		return err
	}
	c.vms = map[string]*qemu.VM{}
	if err := c.stopNetwork(ctx); err != nil {
		return err
	}
	c.cfg.Log("network: stopped")
	for i := range c.st.Nodes {
		c.st.Nodes[i].PID = 0
	}
	c.st.Network.PID = 0
	if err := WriteState(c.cfg.Dir, c.st); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(c.cfg.Dir, EnvFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
