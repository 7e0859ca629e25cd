package kmod

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultParallel bounds how many modules a Loader inserts at once
// (Loader.Parallel overrides it).
//
// A module's insert is not all work for the CPU: finit_module returns only
// when the module's init has run, and a storage driver's init waits for
// the devices it probes (ahci for every SATA port's link, nvme for its
// controllers). modprobe inserts one module after another, but udev runs
// one modprobe per device at once, and so does the Loader: every module
// whose dependencies are in goes in at once. The order of the modules a
// call returns, and every dependency's place before its dependants, stay
// those of a sequential load.
//
// Measured on a q35 VM under software emulation, 1-node `cluster up`,
// the init's 35 modules (console "load kernel modules: done in"):
//
//	vCPUs  one at a time   2 at once     8 at once
//	2      1.24-1.29 s     0.95-1.05 s   0.83-0.90 s
//	1      1.14-1.19 s                   1.11-1.15 s
//
// With one vCPU it gains little: every insert ends by waiting for all of
// the kernel's asynchronous work (async_synchronize_full in
// do_init_module), ahci's port probes included, and the other inserts
// share the CPU with the AHCI chain. It costs nothing there either, so
// one bound serves every machine. (Session 24 tried walks in goroutines
// of their own, one vCPU only, and dropped it at 1.21-1.28 s.)
const DefaultParallel = 8

// planned is one module a Loader call inserts, and what it waits for.
type planned struct {
	name, path string
	// hard: the module was reached as a required one. A soft
	// dependency's failure is only logged.
	hard bool
	// after lists the plan's earlier modules that must be in before this
	// one, and whether each is required (a failure there fails this
	// one without an insert) or only ordered (a soft dependency, or the
	// previous network driver).
	after []edge

	done chan struct{} // closed when err and took are final
	err  error
	took time.Duration
}

type edge struct {
	item     int
	required bool
}

// plan is the modules one Loader call inserts, in the order a sequential
// load would insert them (Index.walk's). Every edge points to an earlier
// module, so the plan cannot deadlock.
type plan struct {
	ix      *Index
	items   []*planned
	byName  map[string]int
	lastNIC int // the plan's last network driver, or -1
}

func newPlan(ix *Index) *plan {
	return &plan{ix: ix, byName: map[string]int{}, lastNIC: -1}
}

// isNetDriver reports whether the module at path is a network driver.
// They go in one after another, in plan order: the kernel names network
// interfaces eth0, eth1, ... in the order their drivers register them, a
// seed may name an interface (eth0) or take the first, and a machine with
// NICs of two drivers must get the same names at every boot.
func isNetDriver(path string) bool {
	return strings.Contains(path, "/drivers/net/")
}

// add records name for insertion (Index.walk's insert callback). Its
// dependencies were walked, so those still to insert are already in the
// plan.
func (p *plan) add(name, path string, hard bool) error {
	if _, ok := p.byName[name]; ok {
		return nil
	}
	it := &planned{name: name, path: path, hard: hard, done: make(chan struct{})}
	link := func(n string, required bool) {
		if i, ok := p.byName[n]; ok {
			it.after = append(it.after, edge{i, required})
		}
	}
	if m := p.ix.modules[name]; m != nil {
		for _, d := range m.deps {
			link(d, true)
		}
	}
	for _, s := range p.ix.softdeps[name].pre {
		for _, r := range p.ix.Resolve(s) {
			link(r, false)
		}
	}
	// A post soft dependency goes in after the module that names it.
	for _, prev := range p.items {
		for _, s := range p.ix.softdeps[prev.name].post {
			for _, r := range p.ix.Resolve(s) {
				if r == name {
					link(prev.name, false)
				}
			}
		}
	}
	if isNetDriver(path) {
		if p.lastNIC >= 0 {
			it.after = append(it.after, edge{p.lastNIC, false})
		}
		p.lastNIC = len(p.items)
	}
	p.byName[name] = len(p.items)
	p.items = append(p.items, it)
	return nil
}

// item returns the planned module name, nil when this plan does not
// insert it.
func (p *plan) item(name string) *planned {
	if i, ok := p.byName[name]; ok {
		return p.items[i]
	}
	return nil
}

// run inserts the plan's modules, each once all it waits for is done, at
// most parallel at a time, and returns when all are done. A module whose
// required dependency failed is not inserted; its error names the
// dependency's.
func (p *plan) run(insert func(path, params string) error, params map[string]string, parallel int) {
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, it := range p.items {
		wg.Go(func() {
			defer close(it.done)
			for _, e := range it.after {
				dep := p.items[e.item]
				<-dep.done
				if dep.err != nil && e.required {
					it.err = fmt.Errorf("module %s: dependency: %w", it.name, dep.err)
					return
				}
			}
			slots <- struct{}{}
			defer func() { <-slots }()
			start := time.Now()
			err := insert(it.path, params[it.name])
			it.took = time.Since(start)
			if err != nil && !errors.Is(err, syscall.EEXIST) {
				it.err = fmt.Errorf("insert %s: %w", it.path, err)
			}
		})
	}
	wg.Wait()
}
