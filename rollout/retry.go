package rollout

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// unavailableTries bounds how often retryUnavailable calls a request that
// fails with gRPC's Unavailable: the connection the client picked broke
// under the request, most often one to a member that just went down,
// which the client's balancer has not dropped yet. clientv3 asks no
// mutating request again once it was sent, so the callers that know
// theirs is safe to ask twice (the membership lock, a put of the same
// record) ask again themselves.
const unavailableTries = 3

// unavailable reports whether err is gRPC's Unavailable.
func unavailable(err error) bool {
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.Unavailable
}

// retryUnavailable calls f up to unavailableTries times while it fails
// with Unavailable, a tenth of a second apart, within ctx.
func retryUnavailable(ctx context.Context, f func() error) error {
	var err error
	for try := 1; ; try++ {
		if err = f(); err == nil || !unavailable(err) || try == unavailableTries || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
