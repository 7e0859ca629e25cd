package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdbox/etcdbox/internal/kvwriter"
	"github.com/etcdbox/etcdbox/nodeapi"
	"github.com/etcdbox/etcdbox/pki"
	"github.com/etcdbox/etcdbox/rollout"
)

// rotation is what the CA rotation's run measured.
type rotation struct {
	total  time.Duration
	phases map[string]time.Duration
	writer writerFigures
	failed int
}

// rotateCA rotates the cluster's CA (rollout.Rotation, as etcdbox
// rotate-ca does) under the writer, and prints its time as a ratio to the
// roll's, its phases and the writer's longest gap. It comes last: the
// old admin certificate the rig holds is refused once it is done.
func (r *rig) rotateCA(ctx context.Context, rl roll, stdout io.Writer) error {
	pkiDir := r.c.PKIDir()
	next := filepath.Join(pkiDir, pki.NextDir)
	if err := pki.InitNamed(next, "etcdbox-ca-bench-next", true); err != nil {
		return err
	}
	newCA, err := pki.LoadCAFiles(next)
	if err != nil {
		return err
	}
	nodeCA, err := newCA.IssueNodeCA(pki.NodeScope{Domains: []string{r.c.Domain()}}, 0)
	if err != nil {
		return err
	}
	nodeCAKey, err := nodeCA.KeyPEM()
	if err != nil {
		return err
	}
	tc, err := nodeapi.RotationTLS(pkiDir, next)
	if err != nil {
		return err
	}
	var nodes []rollout.Node
	for _, n := range r.c.Nodes() {
		api, err := nodeapi.NewClientTLS("https://127.0.0.1:"+strconv.Itoa(n.APIPort), tc)
		if err != nil {
			return err
		}
		defer api.Close()
		nodes = append(nodes, rollout.Node{API: api, EtcdEndpoint: n.Endpoint()})
	}
	cli, err := rollout.Dial(r.c.Endpoints(), tc)
	if err != nil {
		return err
	}
	defer cli.Close()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err = cli.Delete(dctx, kvwriter.Prefix, clientv3.WithPrefix())
	cancel()
	if err != nil {
		return fmt.Errorf("clear the writer's keys: %w", err)
	}
	w, err := kvwriter.Start(r.c.Endpoints(), tc)
	if err != nil {
		return err
	}
	out := rotation{phases: map[string]time.Duration{}}
	var start time.Time
	rot := &rollout.Rotation{
		NewCA: newCA.CertPEM(), NodeCACert: nodeCA.CertPEM(), NodeCAKey: nodeCAKey,
		Nodes: nodes, Etcd: rollout.NewEtcd(cli, tc), By: "bench", Poll: r.poll, ReadyWait: readyDeadline,
		Log: func(format string, args ...any) { r.log("rotate-ca: "+format, args...) },
		// The last node of a phase ends it.
		AfterNode: func(phase, _ string) { out.phases[phase] = time.Since(start) },
	}
	rctx, cancel := context.WithTimeout(ctx, rollDeadline)
	defer cancel()
	start = time.Now()
	err = rot.Run(rctx)
	out.total = time.Since(start)
	res, werr := w.Stop(30 * time.Second)
	out.writer = writerFigures{ops: len(res.History), acked: res.Acked, gap: res.Gap, check: res.Check(checkTimeout), err: werr}
	out.failed = res.Failed
	if err != nil {
		return fmt.Errorf("CA rotation: %w", err)
	}
	fmt.Fprintf(stdout, "CA rotation of %d nodes (trust, reissue, drop; etcd restarted twice per member, the leader last), under the writer:\n", len(nodes))
	fmt.Fprintf(stdout, "  rotation, total:        %s (%.2fx the rolling upgrade's %s in this run)\n", secs(out.total), out.total.Seconds()/rl.total.Seconds(), secs(rl.total))
	fmt.Fprintf(stdout, "  phases end after:       trust %s, reissue %s, drop %s\n", secs(out.phases[nodeapi.RotationTrust]), secs(out.phases[nodeapi.RotationReissue]), secs(out.phases[nodeapi.RotationDrop]))
	fmt.Fprintf(stdout, "  writer during it:       %s, %d failed requests\n", out.writer, out.failed)
	return nil
}
