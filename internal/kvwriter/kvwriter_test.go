package kvwriter

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

func put(id int, key string, v int, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: id, Input: Input{Put: true, Key: key, Value: v}, Call: call, Output: Output{Value: v}, Return: ret}
}

func failedPut(id int, key string, v int, call int64) porcupine.Operation {
	return porcupine.Operation{ClientId: id, Input: Input{Put: true, Key: key, Value: v}, Call: call, Output: Output{Unknown: true}, Return: math.MaxInt64}
}

func get(id int, key string, v int, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: id, Input: Input{Key: key}, Call: call, Output: Output{Value: v}, Return: ret}
}

// TestModel checks that the model accepts what etcd may answer and
// rejects a lost or invented write.
func TestModel(t *testing.T) {
	tests := []struct {
		name string
		hist []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"reads follow acknowledged puts", []porcupine.Operation{
			put(0, "a", 1, 0, 10), get(1, "a", 1, 11, 12), put(0, "a", 2, 13, 20), get(1, "a", 2, 21, 22),
		}, porcupine.Ok},
		{"a concurrent read may see either value", []porcupine.Operation{
			put(0, "a", 1, 0, 10), put(0, "a", 2, 11, 20), get(1, "a", 1, 12, 13),
		}, porcupine.Ok},
		{"an acknowledged put lost", []porcupine.Operation{
			put(0, "a", 1, 0, 10), put(0, "a", 2, 11, 20), get(1, "a", 1, 21, 22),
		}, porcupine.Illegal},
		{"a failed put may take effect later", []porcupine.Operation{
			put(0, "a", 1, 0, 10), failedPut(0, "a", 2, 11), get(1, "a", 1, 30, 31), get(1, "a", 2, 40, 41),
		}, porcupine.Ok},
		{"a failed put may never take effect", []porcupine.Operation{
			put(0, "a", 1, 0, 10), failedPut(0, "a", 2, 11), get(1, "a", 1, 30, 31),
		}, porcupine.Ok},
		{"a value never written", []porcupine.Operation{
			put(0, "a", 1, 0, 10), get(1, "a", 7, 11, 12),
		}, porcupine.Illegal},
		{"a put's failed first try may land after the retry and the next put", []porcupine.Operation{
			failedPut(0, "a", 1, 0), put(0, "a", 2, 5, 10), put(0, "a", 3, 11, 20), get(1, "a", 1, 30, 31),
		}, porcupine.Ok},
		{"keys are independent", []porcupine.Operation{
			put(0, "a", 1, 0, 10), put(1, "b", 5, 0, 10), get(0, "b", 5, 11, 12), get(1, "a", 1, 11, 12),
		}, porcupine.Ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Result{History: tt.hist}.Check(0)
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestPutAsksAgainWithANewValue: a try etcd answers with an error worth
// asking again is recorded as unknown, and the next try writes the next
// value; an error not worth it ends the put, counted as failed.
func TestPutAsksAgainWithANewValue(t *testing.T) {
	w := &Writer{start: time.Now()}
	var tried []int
	errs := []error{rpctypes.ErrTimeout, rpctypes.ErrLeaderChanged, nil}
	last := w.put(context.Background(), 0, "k", 4, func(_ context.Context, v int) error {
		tried = append(tried, v)
		err := errs[0]
		errs = errs[1:]
		return err
	})
	assert.Equal(t, 7, last)
	assert.Equal(t, []int{5, 6, 7}, tried)
	require.Len(t, w.hist, 3)
	for i, op := range w.hist {
		in, out := op.Input.(Input), op.Output.(Output)
		assert.Equal(t, tried[i], in.Value)
		assert.Equal(t, i < 2, out.Unknown, "try %d", i)
		assert.Equal(t, i < 2, op.Return == math.MaxInt64, "try %d", i)
	}
	assert.Zero(t, w.failed, "a put acknowledged in the end did not fail")

	w = &Writer{start: time.Now()}
	last = w.put(context.Background(), 0, "k", 0, func(context.Context, int) error { return errors.New("connection refused") })
	assert.Equal(t, 1, last)
	require.Len(t, w.hist, 1)
	assert.True(t, w.hist[0].Output.(Output).Unknown)
	assert.Equal(t, 1, w.failed)
}

// TestPutCutByStop: a put still under way when the writer stops is
// unknown, like any failed put, and marked Stopped, not counted as failed;
// a put that fails while the writer runs is not marked.
func TestPutCutByStop(t *testing.T) {
	w := &Writer{start: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	w.put(ctx, 0, "k", 0, func(octx context.Context, _ int) error {
		cancel() // the writer stops while the put is under way
		<-octx.Done()
		return octx.Err()
	})
	require.Len(t, w.hist, 1)
	assert.Equal(t, Output{Unknown: true, Stopped: true}, w.hist[0].Output)
	assert.Zero(t, w.failed)

	w = &Writer{start: time.Now()}
	w.put(context.Background(), 0, "k", 0, func(context.Context, int) error { return errors.New("connection refused") })
	require.Len(t, w.hist, 1)
	assert.Equal(t, Output{Unknown: true}, w.hist[0].Output)
	assert.Equal(t, 1, w.failed)
}
