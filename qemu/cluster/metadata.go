package cluster

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/etcdbox/etcdbox/qemu/metadata"
	"github.com/etcdbox/etcdbox/qemu/vnet"
)

// Where a node reads its seed from (Config.SeedSource, Node.SeedSource):
// SourceNoCloud is the seed volume (D/seed.img, attached to the node);
// the others are cloud metadata services that the network daemon serves
// on its gateway at 169.254.169.254, each faithful to its cloud's
// protocol (package qemu/metadata), with the seed as user data and the
// node's name as the instance's name. A node that reads from one has no
// seed volume. A source may list several services, comma-separated, all
// served at once, as a test of the order the node tries them in: the
// broken variants (ec2-imdsv1 answers only token-less IMDSv1 requests,
// gce-noflavor leaves out the Metadata-Flavor header) are for tests that
// a node refuses a service that breaks its protocol and goes on to the
// next.
const SourceNoCloud = "nocloud"

// SourceConfigDrive is an OpenStack config drive (D/config-2.img, a vfat
// volume labelled config-2) attached to the node instead of the seed
// volume; no service is asked.
const SourceConfigDrive = "configdrive"

// metadataServices are the services a seed source may name, each with
// the path prefix its protocol lives under.
var metadataServices = map[string]struct {
	prefix string
	serve  func(metadata.Instance) http.Handler
}{
	"ec2":          {"/latest/", metadata.EC2},
	"ec2-imdsv1":   {"/latest/", metadata.EC2V1Only},
	"gce":          {"/computeMetadata/", metadata.GCE},
	"gce-noflavor": {"/computeMetadata/", metadata.GCENoFlavor},
	"azure":        {"/metadata/", metadata.Azure},
	"openstack":    {"/openstack/", metadata.OpenStack},
}

// SeedSources lists the names a seed source may use, for help texts.
func SeedSources() []string {
	names := []string{SourceNoCloud, SourceConfigDrive}
	for n := range metadataServices {
		names = append(names, n)
	}
	slices.Sort(names[2:])
	return names
}

// CheckSeedSource reports a seed source that names no known service, or
// two services of one protocol.
func CheckSeedSource(src string) error {
	if src == "" || src == SourceNoCloud || src == SourceConfigDrive {
		return nil
	}
	seen := map[string]string{}
	for _, s := range strings.Split(src, ",") {
		svc, ok := metadataServices[s]
		if !ok {
			return fmt.Errorf("seed source %q: unknown %q; want %s, or several cloud services comma-separated", src, s, strings.Join(SeedSources(), ", "))
		}
		if other, dup := seen[svc.prefix]; dup {
			return fmt.Errorf("seed source %q: %s and %s are the same protocol", src, other, s)
		}
		seen[svc.prefix] = s
	}
	return nil
}

// seedSourceOf is node n's seed source in state st.
func seedSourceOf(st State, n Node) string {
	return or(n.SeedSource, or(st.SeedSource, SourceNoCloud))
}

// metadataServer answers the guests' metadata requests for the network
// daemon: it tells the asking node by its address, reads its seed source
// from D/state.json and its user data from D/SeedYAML at each request
// (so a node added later, or a seed written anew by Reseed, is served
// without a restart), and hands the request to that source's service
// for the path. A node whose source does not serve the path gets 404, as
// on a cloud without that service.
type metadataServer struct {
	net *vnet.Network
	dir string // the cluster directory

	mu sync.Mutex
	// handlers keeps each node's services between requests (IMDSv2's
	// tokens live in them), per user data.
	handlers map[string]http.Handler
}

func (m *metadataServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, ok := m.net.RemoteHost(r)
	if !ok {
		http.Error(w, "unknown instance "+r.RemoteAddr, http.StatusNotFound)
		return
	}
	st, err := ReadState(m.dir)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	src := or(st.SeedSource, SourceNoCloud)
	for _, n := range st.Nodes {
		if n.Name == h.Name {
			src = seedSourceOf(st, n)
		}
	}
	if src == SourceNoCloud || src == SourceConfigDrive {
		http.NotFound(w, r)
		return
	}
	for _, s := range strings.Split(src, ",") {
		svc, ok := metadataServices[s]
		if !ok || !strings.HasPrefix(r.URL.Path, svc.prefix) {
			continue
		}
		userData, err := os.ReadFile(filepath.Join(m.dir, SeedYAML))
		if err != nil {
			http.Error(w, "user data: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		m.handler(h.Name, s, userData, svc.serve).ServeHTTP(w, r)
		return
	}
	http.NotFound(w, r)
}

// handler returns node's handler of service svc for userData.
func (m *metadataServer) handler(node, svc string, userData []byte, serve func(metadata.Instance) http.Handler) http.Handler {
	key := fmt.Sprintf("%s/%s/%x", node, svc, sha256.Sum256(userData))
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.handlers == nil {
		m.handlers = map[string]http.Handler{}
	}
	h, ok := m.handlers[key]
	if !ok {
		h = serve(metadata.Instance{Name: node, UserData: userData})
		m.handlers[key] = h
	}
	return h
}

// SetSeedSource makes node name read its seed from src at its next
// boots ("" for the cluster's source), e.g. a wiped node that then
// starts from a cloud's metadata. The node must not be running: a
// running VM keeps the disks it started with.
func (c *Cluster) SetSeedSource(name, src string) error {
	if err := CheckSeedSource(src); err != nil {
		return err
	}
	unlock, err := lockDir(c.cfg.Dir)
	if err != nil {
		return err
	}
	defer unlock()
	if vm, err := c.VM(name); err == nil {
		return fmt.Errorf("seed source of %s: %w (pid %d); stop it first", name, ErrNodeRunning, vm.PID())
	}
	for i := range c.st.Nodes {
		if c.st.Nodes[i].Name == name {
			c.st.Nodes[i].SeedSource = src
			c.cfg.Log("%s: reads its seed from %s from its next boot", name, seedSourceOf(c.st, c.st.Nodes[i]))
			return c.save()
		}
	}
	return fmt.Errorf("seed source of %s: no such node", name)
}
