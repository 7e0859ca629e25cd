package rollout

import "context"

// Status is what `etcdbox upgrade --status` shows: the target and each
// node's record.
type Status struct {
	Target  *Target
	Records []NodeRecord
}

// ReadStatus reads the roll's records.
func ReadStatus(ctx context.Context, e Etcd) (Status, error) {
	var s Status
	t, ok, err := e.Target(ctx)
	if err != nil {
		return s, err
	}
	if ok {
		s.Target = &t
	}
	s.Records, err = e.Records(ctx)
	return s, err
}
