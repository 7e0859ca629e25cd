package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/etcdbox/etcdbox/internal/testenv"
	"github.com/etcdbox/etcdbox/seed"
)

// manifestSeeds writes a CA and two seeds made by etcdbox seed: n1 of
// three static peers (ports moved off the defaults), and a nameless node
// found by DNS SRV.
func manifestSeeds(t *testing.T) (peers, srv string) {
	t.Helper()
	dir := t.TempDir()
	pkiDir := filepath.Join(dir, "pki")
	_, _, code, err := runExit(t, "pki", "init", "--dir", pkiDir)
	require.NoError(t, err)
	require.Zero(t, code)
	peers, srv = filepath.Join(dir, "n1.yaml"), filepath.Join(dir, "srv.yaml")
	_, _, _, err = runExit(t, "seed", "--cluster", "prod", "--pki", pkiDir, "--name", "n1",
		"--peer", "n1=10.0.0.11:12380:12379", "--peer", "n2=10.0.0.12:12380:12379", "--peer", "n3=10.0.0.13:12380:12379", "-o", peers)
	require.NoError(t, err)
	// The seed's own ports: the flags above set the peers' only.
	data, err := os.ReadFile(peers)
	require.NoError(t, err)
	data = append(data, "etcd: {clientPort: 12379, peerPort: 12380, metricsPort: 12381, httpPort: 12382}\napi: {port: 19379}\n"...)
	require.NoError(t, os.WriteFile(peers, data, 0o600))
	_, _, _, err = runExit(t, "seed", "--cluster", "dev", "--pki", pkiDir, "--srv", "etcd.example.internal", "--initial-size", "3", "-o", srv)
	require.NoError(t, err)
	return peers, srv
}

// decodePod decodes a manifest strictly as a v1 Pod: an unknown or
// misplaced field, a duplicate key or a wrongly typed value fails.
func decodePod(t *testing.T, manifest []byte) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	require.NoError(t, yaml.UnmarshalStrict(manifest, &p), "a strict v1 Pod:\n%s", manifest)
	return &p
}

// TestManifestStaticPod decodes the manifest with the Kubernetes API
// types and checks kubeadm's shape, the seed's names and ports, the
// mounts, the command and the probes.
func TestManifestStaticPod(t *testing.T) {
	peers, srv := manifestSeeds(t)
	const image = "registry.example.internal:5000/etcdbox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	out, stderr, code, err := runExit(t, "manifest", "static-pod", "--seed", peers, "--image", image)
	require.NoError(t, err)
	require.Zero(t, code)
	assert.Empty(t, stderr)
	p := decodePod(t, []byte(out))

	assert.Equal(t, "v1", p.APIVersion)
	assert.Equal(t, "Pod", p.Kind)
	assert.Equal(t, "etcdbox-n1", p.Name)
	assert.Equal(t, "kube-system", p.Namespace)
	assert.Empty(t, validation.IsDNS1123Subdomain(p.Name), "the pod's name")
	assert.Equal(t, "etcd", p.Labels["component"])
	assert.Equal(t, "control-plane", p.Labels["tier"])
	assert.Equal(t, "prod", p.Labels["app.kubernetes.io/instance"], "the seed's cluster")
	for k, v := range p.Labels {
		assert.Empty(t, validation.IsQualifiedName(k), "label %s", k)
		assert.Empty(t, validation.IsValidLabelValue(v), "label %s=%s", k, v)
	}
	assert.Equal(t, "prod", p.Annotations["etcdbox/cluster"])

	s := p.Spec
	assert.True(t, s.HostNetwork)
	assert.Equal(t, corev1.DNSDefault, s.DNSPolicy, "the host's resolver: etcd runs below the cluster's DNS")
	assert.Equal(t, "system-node-critical", s.PriorityClassName)
	require.NotNil(t, s.SecurityContext)
	require.NotNil(t, s.SecurityContext.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, s.SecurityContext.SeccompProfile.Type)
	require.NotNil(t, s.TerminationGracePeriodSeconds)
	assert.GreaterOrEqual(t, *s.TerminationGracePeriodSeconds, int64(40), "room for the init's graceful stop")

	require.Len(t, s.Volumes, 2)
	hostPaths := map[string]*corev1.HostPathVolumeSource{}
	for _, v := range s.Volumes {
		require.NotNil(t, v.HostPath, "volume %s is a hostPath", v.Name)
		hostPaths[v.Name] = v.HostPath
	}
	require.Len(t, s.Containers, 1)
	c := s.Containers[0]
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	seedMount, dataMount := mounts["/etc/etcdbox/seed.yaml"], mounts["/var/lib/etcdbox"]
	require.Contains(t, hostPaths, seedMount.Name, "the seed's mount has a volume")
	require.Contains(t, hostPaths, dataMount.Name, "the data's mount has a volume")
	assert.Equal(t, "/etc/etcdbox/seed.yaml", hostPaths[seedMount.Name].Path)
	assert.Equal(t, corev1.HostPathFile, *hostPaths[seedMount.Name].Type)
	assert.True(t, seedMount.ReadOnly, "the seed is mounted read-only")
	assert.Equal(t, "/var/lib/etcdbox", hostPaths[dataMount.Name].Path)
	assert.Equal(t, corev1.HostPathDirectoryOrCreate, *hostPaths[dataMount.Name].Type)
	assert.False(t, dataMount.ReadOnly)

	assert.Equal(t, image, c.Image)
	assert.Equal(t, []string{"/init", "--container", "--seed", "/etc/etcdbox/seed.yaml", "--data-dir", "/var/lib/etcdbox",
		"--health-addr", "127.0.0.1:9380", "--listen-ip", "10.0.0.11"}, c.Command, "the seed's own address among its static peers")
	assert.Empty(t, c.Args)
	assert.True(t, c.Resources.Requests.Cpu().Equal(resource.MustParse("100m")), "cpu request %s", c.Resources.Requests.Cpu())
	assert.True(t, c.Resources.Requests.Memory().Equal(resource.MustParse("100Mi")), "memory request %s", c.Resources.Requests.Memory())
	ports := map[string]int32{}
	for _, cp := range c.Ports {
		assert.Equal(t, corev1.ProtocolTCP, cp.Protocol)
		assert.Empty(t, validation.IsValidPortName(cp.Name), cp.Name)
		ports[cp.Name] = cp.ContainerPort
	}
	assert.Equal(t, map[string]int32{"client": 12379, "peer": 12380, "node-api": 19379, "health": 9380, "metrics": 12381, "http": 12382}, ports, "the seed's ports")

	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"startup", c.StartupProbe, "/livez"}, {"liveness", c.LivenessProbe, "/livez"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		require.NotNil(t, pr.probe, pr.name)
		g := pr.probe.HTTPGet
		require.NotNil(t, g, "%s probe: httpGet", pr.name)
		assert.Equal(t, "127.0.0.1", g.Host, pr.name)
		assert.Equal(t, pr.path, g.Path, pr.name)
		assert.Equal(t, intstr.FromInt32(9380), g.Port, pr.name)
		assert.Equal(t, corev1.URISchemeHTTP, g.Scheme, pr.name)
		assert.Positive(t, pr.probe.PeriodSeconds, pr.name)
		assert.Positive(t, pr.probe.FailureThreshold, pr.name)
	}

	// The seed holds the node CA's key; the manifest holds nothing of it.
	seedText, err := os.ReadFile(peers)
	require.NoError(t, err)
	sd, err := seed.Parse(seedText)
	require.NoError(t, err)
	require.NotEmpty(t, sd.PKI.NodeCAKey)
	assert.NotContains(t, out, "PRIVATE KEY")
	assert.NotContains(t, out, "CERTIFICATE")
	assert.NotContains(t, out, "caCert")

	t.Run("SRV seed without a name, other host paths and port, to a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "etcdbox.yaml")
		stdout, _, code, err := runExit(t, "manifest", "static-pod", "--seed", srv, "--image", "etcdbox:1.4",
			"--data-dir", "/srv/etcdbox", "--seed-path", "/srv/etcdbox-seed.yaml", "--health-port", "9999", "-o", file)
		require.NoError(t, err)
		require.Zero(t, code)
		assert.Empty(t, stdout)
		fi, err := os.Stat(file)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		p := decodePod(t, data)
		assert.Equal(t, "etcdbox", p.Name, "no node name in the seed: kubelet adds the host's")
		assert.Equal(t, "dev", p.Labels["app.kubernetes.io/instance"])
		c := p.Spec.Containers[0]
		assert.Equal(t, []string{"/init", "--container", "--seed", "/etc/etcdbox/seed.yaml", "--data-dir", "/var/lib/etcdbox",
			"--health-addr", "127.0.0.1:9999"}, c.Command, "no --listen-ip: the name under the SRV domain is advertised")
		paths := map[string]string{}
		for _, v := range p.Spec.Volumes {
			paths[v.Name] = v.HostPath.Path
		}
		assert.ElementsMatch(t, []string{"/srv/etcdbox", "/srv/etcdbox-seed.yaml"}, []string{paths["etcdbox-data"], paths["etcdbox-seed"]})
		for _, pr := range []*corev1.Probe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
			assert.Equal(t, intstr.FromInt32(9999), pr.HTTPGet.Port)
		}
		assert.Equal(t, "etcdbox:1.4", c.Image)
	})
}

// TestManifestCommandFlags: every flag the pod's command gives the init is
// one the init defines (init/main.go), so the manifest and the init do
// not drift apart.
func TestManifestCommandFlags(t *testing.T) {
	peers, _ := manifestSeeds(t)
	out, _, _, err := runExit(t, "manifest", "static-pod", "--seed", peers, "--image", "etcdbox:1")
	require.NoError(t, err)
	src, err := os.ReadFile(filepath.Join(testenv.Root(t), "init", "main.go"))
	require.NoError(t, err)
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`flag\.\w+Var\(&[\w.]+, "([\w-]+)"`).FindAllStringSubmatch(string(src), -1) {
		defined["--"+m[1]] = true
	}
	require.Contains(t, defined, "--container", "the init's flags are read from its source")
	cmd := decodePod(t, []byte(out)).Spec.Containers[0].Command
	require.Equal(t, "/init", cmd[0])
	for _, arg := range cmd[1:] {
		if strings.HasPrefix(arg, "--") {
			assert.True(t, defined[arg], "the init defines no %s", arg)
		}
	}
}

// TestManifestBadInput: each mistake is named, with exit status 2 for the
// command line and 1 for a seed that is missing or bad, and no file is
// written.
func TestManifestBadInput(t *testing.T) {
	peers, _ := manifestSeeds(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("cluster: prod\netcd:\n  clientPort: 99999\nnmae: n1\n"), 0o600))
	out := filepath.Join(dir, "out.yaml")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no --seed", []string{"--image", "etcdbox:1"}, exitUsage, []string{`"seed"`, "not set"}},
		{"no --image", []string{"--seed", peers}, exitUsage, []string{`"image"`, "not set"}},
		{"unknown flag", []string{"--seed", peers, "--image", "etcdbox:1", "--data", "/x"}, exitUsage, []string{"unknown flag: --data"}},
		{"bad --image", []string{"--seed", peers, "--image", "Etcdbox::1"}, exitUsage, []string{`--image "Etcdbox::1"`}},
		{"relative --data-dir", []string{"--seed", peers, "--image", "etcdbox:1", "--data-dir", "data"}, exitUsage, []string{`--data-dir "data"`, "absolute"}},
		{"seed in the data", []string{"--seed", peers, "--image", "etcdbox:1", "--seed-path", "/var/lib/etcdbox/seed.yaml"}, exitUsage, []string{"--seed-path", "inside --data-dir"}},
		{"health port of the seed", []string{"--seed", peers, "--image", "etcdbox:1", "--health-port", "19379"}, exitUsage, []string{"--health-port 19379", "api.port"}},
		{"health port of etcd's metrics", []string{"--seed", peers, "--image", "etcdbox:1", "--health-port", "12381"}, exitUsage, []string{"--health-port 12381", "etcd.metricsPort"}},
		{"bad --listen-ip", []string{"--seed", peers, "--image", "etcdbox:1", "--listen-ip", "n1"}, exitUsage, []string{`--listen-ip "n1"`}},
		{"missing seed", []string{"--seed", filepath.Join(dir, "none.yaml"), "--image", "etcdbox:1"}, exitError, []string{"--seed", "none.yaml", "no such file"}},
		{"invalid seed", []string{"--seed", bad, "--image", "etcdbox:1"}, exitError, []string{bad, "etcd.clientPort", "nmae", "pki"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"manifest", "static-pod", "-o", out}, tc.args...)
			stdout, _, code, err := runExit(t, args...)
			require.Error(t, err)
			assert.Equal(t, tc.code, code, "%v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Empty(t, stdout)
			assert.NoFileExists(t, out, "nothing is written on an error")
		})
	}
}

// TestManifestLinksNoKubernetes: the CLI writes the manifest without the
// Kubernetes API types, which only its tests link (DESIGN §1 keeps the
// CLI small).
func TestManifestLinksNoKubernetes(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/etcdbox")
	cmd.Dir = testenv.Root(t)
	deps, err := cmd.Output()
	require.NoError(t, err)
	require.Contains(t, string(deps), "sigs.k8s.io/yaml\n", "the list is the CLI's")
	for _, d := range strings.Fields(string(deps)) {
		assert.False(t, strings.HasPrefix(d, "k8s.io/"), "the CLI links %s", d)
	}
}
