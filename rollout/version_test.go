package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckVersions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   map[string]string
		target  string
		want    VersionPlan
		wantErr string
	}{
		{"patch", map[string]string{"n1": "3.7.1", "n2": "3.7.3"}, "3.7.3", VersionPlan{From: Minor{3, 7}, To: Minor{3, 7}}, ""},
		{"one minor up", map[string]string{"n1": "3.6.16", "n2": "3.6.16"}, "3.7.3", VersionPlan{From: Minor{3, 6}, To: Minor{3, 7}, Upgrade: true}, ""},
		{"resumed halfway", map[string]string{"n1": "3.7.3", "n2": "3.6.16"}, "v3.7.3", VersionPlan{From: Minor{3, 6}, To: Minor{3, 7}, Upgrade: true}, ""},
		{"one minor down", map[string]string{"n1": "3.7.3"}, "3.6.16", VersionPlan{From: Minor{3, 7}, To: Minor{3, 6}, Downgrade: true}, ""},
		{"skip up", map[string]string{"n1": "3.5.21", "n2": "3.6.16"}, "3.7.3", VersionPlan{},
			"etcd version rule: node n1 runs etcd 3.5.21 and the image has etcd 3.7.3: that skips 3.6; etcd upgrades one minor at a time, so roll to an image with etcd 3.6 first"},
		{"skip down", map[string]string{"n1": "3.7.3"}, "3.5.21", VersionPlan{},
			"etcd version rule: node n1 runs etcd 3.7.3 and the image has etcd 3.5.21: etcd downgrades one minor at a time, so roll to an image with etcd 3.6 first"},
		{"both sides", map[string]string{"n1": "3.6.1", "n2": "3.8.0"}, "3.7.3", VersionPlan{},
			"etcd version rule: nodes run etcd 3.6 and above 3.7 at once"},
		{"unknown node version", map[string]string{"n1": ""}, "3.7.3", VersionPlan{},
			`etcd version rule: node n1: etcd version "": want major.minor.patch`},
		{"bad image version", map[string]string{"n1": "3.7.3"}, "latest", VersionPlan{},
			`etcd version rule: image: etcd version "latest": want major.minor.patch`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CheckVersions(tc.nodes, tc.target)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, ErrVersion)
				assert.Equal(t, tc.wantErr, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLastMover(t *testing.T) {
	plan := VersionPlan{From: Minor{3, 6}, To: Minor{3, 7}, Upgrade: true}
	nodes := map[string]string{"n1": "3.6.16", "n2": "3.7.3", "n3": "3.7.3"}
	assert.True(t, LastMover(plan, nodes, "n1"))
	assert.False(t, LastMover(plan, nodes, "n2"), "n2 runs the target already")
	nodes["n2"] = "3.6.16"
	assert.False(t, LastMover(plan, nodes, "n1"), "n2 has yet to move")
	assert.False(t, LastMover(VersionPlan{From: Minor{3, 7}, To: Minor{3, 7}}, map[string]string{"n1": "3.7.1"}, "n1"), "no minor crossed")
}

func TestPointOfNoReturn(t *testing.T) {
	plan := VersionPlan{From: Minor{3, 6}, To: Minor{3, 7}, Upgrade: true}
	assert.NoError(t, pointOfNoReturn(plan, Cluster{ClusterVersion: "3.6.0"}, "n1"))
	assert.EqualError(t, pointOfNoReturn(plan, Cluster{ClusterVersion: "3.7.0"}, "n1"),
		"before node n1, the last member to move to etcd 3.7: the cluster version is 3.7.0 already, want 3.6")
	assert.Error(t, pointOfNoReturn(plan, Cluster{}, "n1"))
}
