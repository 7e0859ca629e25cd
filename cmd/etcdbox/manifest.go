package main

import (
	"fmt"
	"io"
	"net"
	"path"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/seed"
)

func init() { commands = append(commands, newManifestCmd) }

// newManifestCmd is `etcdbox manifest`: manifests that run the container
// form of etcdbox under another system.
func newManifestCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "manifest",
		Short: "Write manifests that run etcdbox's container form",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newStaticPodCmd())
	return cmd
}

// Paths inside the container, and the defaults of the host's.
const (
	podSeedPath    = "/etc/etcdbox/seed.yaml"
	podDataDir     = "/var/lib/etcdbox"
	podHealthPort  = 9380
	podSeedVolume  = "etcdbox-seed"
	podDataVolume  = "etcdbox-data"
	podHealthHost  = "127.0.0.1"
	podNamespace   = "kube-system"
	podPriority    = "system-node-critical"
	podGracePeriod = 60
)

// staticPodOptions are the flags of `etcdbox manifest static-pod`.
type staticPodOptions struct {
	seedFile, image, out string
	// seedPath and dataDir are on the host, where kubelet runs the pod.
	seedPath, dataDir string
	healthPort        int
	// listenIP is the init's --listen-ip: "" for the seed's (listenIP).
	listenIP string
}

func newStaticPodCmd() *cobra.Command {
	o := staticPodOptions{seedPath: podSeedPath, dataDir: podDataDir, healthPort: podHealthPort}
	cmd := &cobra.Command{
		Use:   "static-pod --seed FILE --image REF [-o FILE]",
		Short: "Write a Kubernetes static-pod manifest that runs one etcdbox node",
		Long: `Write a Kubernetes static-pod manifest (YAML) for the node whose seed is
FILE, in the shape kubeadm gives its local etcd: host network, priority
class system-node-critical, the RuntimeDefault seccomp profile, requests of
100m CPU and 100Mi memory, the data directory a hostPath (DirectoryOrCreate),
and the container form of the image (etcdbox build --format oci) running
/init --container.

The seed is read and checked with the node's own parser first; its node
name, cluster name and ports go into the manifest (pod etcdbox-NAME in
kube-system). The seed itself is never copied into the manifest, which is
readable by anyone on the host: it may hold the node CA's key. Put FILE on
the host at --seed-path (mode 0600), from where the pod mounts it read-only.

kubelet probes cannot present a client certificate, and the node API and
etcd take mutual TLS only; the pod's init therefore serves plain-HTTP
/livez and /readyz on 127.0.0.1:--health-port, and nothing else (init
--health-addr). The startup and liveness probes ask /livez (the init
answers and supervises etcd: a member waiting for its peers is not restarted),
the readiness probe /readyz (the member serves a linearizable read).

With a static peer list that gives this node an IP address, etcd and the
node API listen on that address (--listen-ip), which is what the peers
expect; then not on 127.0.0.1.

Put the output in kubelet's staticPodPath (kubeadm's is
/etc/kubernetes/manifests) on the node's host.`,
		Example: `  etcdbox manifest static-pod --seed n1.yaml --image registry.example.internal:5000/etcdbox@sha256:... -o /etc/kubernetes/manifests/etcdbox.yaml
  etcdbox manifest static-pod --seed n1.yaml --image etcdbox:1.4 --data-dir /srv/etcdbox --seed-path /srv/seed.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.OutOrStdout(), cmd.ErrOrStderr()) },
	}
	f := cmd.Flags()
	f.StringVar(&o.seedFile, "seed", "", "the node's seed (YAML), read and checked here")
	f.StringVar(&o.image, "image", "", "the etcdbox OCI image the pod runs (etcdbox build --format oci; a digest pins it)")
	f.StringVarP(&o.out, "output", "o", "", "write the manifest to FILE (mode 0644) instead of stdout")
	f.StringVar(&o.seedPath, "seed-path", o.seedPath, "where the seed is on the host (an absolute path; mounted read-only)")
	f.StringVar(&o.dataDir, "data-dir", o.dataDir, "the node's data directory on the host (an absolute path; created when missing)")
	f.IntVar(&o.healthPort, "health-port", o.healthPort, "the loopback port of the init's /livez and /readyz, which the probes ask")
	f.StringVar(&o.listenIP, "listen-ip", "", "the address etcd and the node API listen on and advertise (default: this node's address in the seed's static peers, else every address, advertising the host's first)")
	cmd.MarkFlagRequired("seed")
	cmd.MarkFlagRequired("image")
	return cmd
}

// run checks the flags and the seed, then writes the manifest.
func (o *staticPodOptions) run(stdout, stderr io.Writer) error {
	if err := o.check(); err != nil {
		return err
	}
	data, err := seed.ReadFile(o.seedFile)
	if err != nil {
		return fmt.Errorf("--seed: %w", err)
	}
	s, err := seed.Parse(data)
	if err != nil {
		return seedProblems(o.seedFile, data, err)
	}
	if err := o.checkPorts(s); err != nil {
		return err
	}
	if len(s.Network.Interfaces) > 0 || len(s.Network.DNS) > 0 || len(s.Network.Search) > 0 {
		fmt.Fprintf(stderr, "warning: %s: the seed's network section is not used in a pod, which has the host's network\n", o.seedFile)
	}
	out, err := yaml.Marshal(o.pod(s))
	if err != nil {
		return err
	}
	out = append([]byte(o.header(s)), out...)
	if o.out == "" || o.out == "-" {
		_, err = stdout.Write(out)
		return err
	}
	// 0644 as kubeadm's manifests: it holds no secret (the seed, which
	// may, stays in its own file on the host).
	return pki.WriteFileAtomic(o.out, out, 0o644)
}

// check checks the flags that need no seed.
func (o *staticPodOptions) check() error {
	if _, err := name.ParseReference(o.image); err != nil {
		return usageError{fmt.Errorf("--image %q: %w", o.image, err)}
	}
	for _, p := range []struct{ flag, path string }{{"--seed-path", o.seedPath}, {"--data-dir", o.dataDir}} {
		if !path.IsAbs(p.path) || path.Clean(p.path) != p.path || p.path == "/" {
			return usageError{fmt.Errorf("%s %q: want an absolute, clean path on the host, not /", p.flag, p.path)}
		}
	}
	if o.seedPath == o.dataDir || strings.HasPrefix(o.seedPath, o.dataDir+"/") {
		return usageError{fmt.Errorf("--seed-path %q is inside --data-dir %q: keep the seed out of the node's data", o.seedPath, o.dataDir)}
	}
	if o.listenIP != "" && net.ParseIP(o.listenIP) == nil {
		return usageError{fmt.Errorf("--listen-ip %q: want an IP address", o.listenIP)}
	}
	if o.healthPort < 1 || o.healthPort > 65535 {
		return usageError{fmt.Errorf("--health-port %d: want a port, 1 to 65535", o.healthPort)}
	}
	return nil
}

// checkPorts refuses a health port that one of the seed's listeners
// takes: in the host's network they share one set of ports.
func (o *staticPodOptions) checkPorts(s *seed.Seed) error {
	for _, p := range []struct {
		key  string
		port int
	}{{"etcd.clientPort", s.Etcd.ClientPort}, {"etcd.peerPort", s.Etcd.PeerPort}, {"api.port", s.API.Port}, {"etcd.metricsPort", s.Etcd.MetricsPort}, {"etcd.httpPort", s.Etcd.HTTPPort}} {
		if p.port == o.healthPort {
			return usageError{fmt.Errorf("--health-port %d: the seed's %s is %d too: pick another", o.healthPort, p.key, p.port)}
		}
	}
	return nil
}

// listenIP is the address the init listens on and advertises: --listen-ip,
// or this node's own entry in the seed's static peers when that is an IP
// address. Its peers expect the member there, and on a host with several
// addresses (bridges, CNI interfaces) the init, listening on all of them,
// would advertise the first it finds. "" listens on every address.
func (o *staticPodOptions) listenAddr(s *seed.Seed) string {
	if o.listenIP != "" {
		return o.listenIP
	}
	for _, p := range s.Discovery.Peers {
		if ip := net.ParseIP(p.Host); ip != nil && s.Name != "" && p.Name == s.Name {
			return ip.String()
		}
	}
	return ""
}

// podName is the pod's name: etcdbox-NODE, or etcdbox when the seed names
// no node (the node is then named after the host, and kubelet names the
// mirror pod after the host too).
func podName(s *seed.Seed) string {
	if s.Name == "" {
		return "etcdbox"
	}
	return "etcdbox-" + s.Name
}

// header is the comment the manifest starts with.
func (o *staticPodOptions) header(s *seed.Seed) string {
	node := "the host's name"
	if s.Name != "" {
		node = strconv.Quote(s.Name)
	}
	return fmt.Sprintf(`# etcdbox as a Kubernetes static pod: node %s of cluster %q.
# Written by etcdbox manifest static-pod. Put it in kubelet's staticPodPath
# (kubeadm: /etc/kubernetes/manifests), and the node's seed at %s
# (mode 0600: it may hold the node CA's key; it is not in this manifest).
`, node, s.Cluster, o.seedPath)
}

// The pod, in the fields of Kubernetes' v1 Pod that the manifest sets,
// under the same JSON names: the CLI does not link the Kubernetes API
// types (its test decodes the output strictly with them).
type (
	podManifest struct {
		APIVersion string  `json:"apiVersion"`
		Kind       string  `json:"kind"`
		Metadata   podMeta `json:"metadata"`
		Spec       podSpec `json:"spec"`
	}
	podMeta struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	}
	podSpec struct {
		HostNetwork       bool   `json:"hostNetwork"`
		DNSPolicy         string `json:"dnsPolicy"`
		PriorityClassName string `json:"priorityClassName"`
		SecurityContext   struct {
			SeccompProfile struct {
				Type string `json:"type"`
			} `json:"seccompProfile"`
		} `json:"securityContext"`
		TerminationGracePeriodSeconds int            `json:"terminationGracePeriodSeconds"`
		Containers                    []podContainer `json:"containers"`
		Volumes                       []podVolume    `json:"volumes"`
	}
	podContainer struct {
		Name            string    `json:"name"`
		Image           string    `json:"image"`
		ImagePullPolicy string    `json:"imagePullPolicy"`
		Command         []string  `json:"command"`
		Ports           []podPort `json:"ports"`
		Resources       struct {
			Requests map[string]string `json:"requests"`
		} `json:"resources"`
		VolumeMounts   []podMount `json:"volumeMounts"`
		StartupProbe   *podProbe  `json:"startupProbe"`
		LivenessProbe  *podProbe  `json:"livenessProbe"`
		ReadinessProbe *podProbe  `json:"readinessProbe"`
	}
	podPort struct {
		Name          string `json:"name"`
		ContainerPort int    `json:"containerPort"`
		Protocol      string `json:"protocol"`
	}
	podMount struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
		ReadOnly  bool   `json:"readOnly,omitempty"`
	}
	podVolume struct {
		Name     string `json:"name"`
		HostPath struct {
			Path string `json:"path"`
			Type string `json:"type"`
		} `json:"hostPath"`
	}
	podProbe struct {
		HTTPGet struct {
			Host   string `json:"host"`
			Path   string `json:"path"`
			Port   int    `json:"port"`
			Scheme string `json:"scheme"`
		} `json:"httpGet"`
		InitialDelaySeconds int `json:"initialDelaySeconds,omitempty"`
		PeriodSeconds       int `json:"periodSeconds"`
		TimeoutSeconds      int `json:"timeoutSeconds"`
		FailureThreshold    int `json:"failureThreshold"`
	}
)

// pod is the static pod for the node of seed s.
//
// The probes are kubeadm's for its etcd, on the init's health listener:
// startup and liveness ask /livez, since a member that waits for its
// peers (a formation, a quorum) is not mended by a restart and the init
// restarts etcd itself; readiness asks /readyz. Not etcd's own plain-HTTP
// listener, as kubeadm's probes are: etcdbox's etcd has one only when the
// seed sets etcd.metricsPort, and then on the node's listen address, for
// a scraper on the network; and etcd's answer cannot tell whether the
// init supervises it at all. dnsPolicy Default: etcd runs below the
// cluster's DNS, and an SRV seed is answered by the host's resolver. The grace period covers the init's stop: leadership
// handed over, etcd given 30 s, the node API 5 s.
func (o *staticPodOptions) pod(s *seed.Seed) podManifest {
	p := podManifest{APIVersion: "v1", Kind: "Pod"}
	p.Metadata = podMeta{
		Name:      podName(s),
		Namespace: podNamespace,
		Labels: map[string]string{
			"component": "etcd", "tier": "control-plane",
			"app.kubernetes.io/name": "etcdbox", "app.kubernetes.io/instance": s.Cluster,
		},
		Annotations: map[string]string{"etcdbox/cluster": s.Cluster},
	}
	if s.Name != "" {
		p.Metadata.Annotations["etcdbox/node"] = s.Name
	}
	p.Spec = podSpec{HostNetwork: true, DNSPolicy: "Default", PriorityClassName: podPriority, TerminationGracePeriodSeconds: podGracePeriod}
	p.Spec.SecurityContext.SeccompProfile.Type = "RuntimeDefault"
	c := podContainer{
		Name: "etcdbox", Image: o.image, ImagePullPolicy: "IfNotPresent",
		Command: []string{"/init", "--container", "--seed", podSeedPath, "--data-dir", podDataDir,
			"--health-addr", podHealthHost + ":" + strconv.Itoa(o.healthPort)},
		Ports: []podPort{
			{"client", s.Etcd.ClientPort, "TCP"}, {"peer", s.Etcd.PeerPort, "TCP"},
			{"node-api", s.API.Port, "TCP"}, {"health", o.healthPort, "TCP"},
		},
		VolumeMounts: []podMount{
			{Name: podSeedVolume, MountPath: podSeedPath, ReadOnly: true},
			{Name: podDataVolume, MountPath: podDataDir},
		},
		StartupProbe:   o.probe("/livez", 10, 10, 24),
		LivenessProbe:  o.probe("/livez", 10, 10, 8),
		ReadinessProbe: o.probe("/readyz", 0, 1, 3),
	}
	if h := s.Etcd.HTTPPort; h > 0 && h != s.Etcd.ClientPort {
		c.Ports = append(c.Ports, podPort{"http", h, "TCP"})
	}
	if m := s.Etcd.MetricsPort; m > 0 {
		c.Ports = append(c.Ports, podPort{"metrics", m, "TCP"})
	}
	if ip := o.listenAddr(s); ip != "" {
		c.Command = append(c.Command, "--listen-ip", ip)
	}
	c.Resources.Requests = map[string]string{"cpu": "100m", "memory": "100Mi"}
	p.Spec.Containers = []podContainer{c}
	p.Spec.Volumes = []podVolume{hostPathVolume(podSeedVolume, o.seedPath, "File"), hostPathVolume(podDataVolume, o.dataDir, "DirectoryOrCreate")}
	return p
}

// probe is an HTTP probe of the init's health listener.
func (o *staticPodOptions) probe(path string, delay, period, failures int) *podProbe {
	p := &podProbe{InitialDelaySeconds: delay, PeriodSeconds: period, TimeoutSeconds: 15, FailureThreshold: failures}
	p.HTTPGet.Host, p.HTTPGet.Path, p.HTTPGet.Port, p.HTTPGet.Scheme = podHealthHost, path, o.healthPort, "HTTP"
	return p
}

func hostPathVolume(name, path, kind string) podVolume {
	v := podVolume{Name: name}
	v.HostPath.Path, v.HostPath.Type = path, kind
	return v
}
