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

// put is a write from expect to v that set the key.
func put(id int, key string, expect, v int, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: id, Input: Input{Put: true, Key: key, Value: v, Expect: expect}, Call: call, Output: Output{Value: v, Set: true}, Return: ret}
}

// failedPut is a write from expect to v that failed: unknown.
func failedPut(id int, key string, expect, v int, call int64) porcupine.Operation {
	return porcupine.Operation{ClientId: id, Input: Input{Put: true, Key: key, Value: v, Expect: expect}, Call: call, Output: Output{Unknown: true}, Return: math.MaxInt64}
}

// comparedFalse is a write from expect to v whose compare was false: it
// read got.
func comparedFalse(id int, key string, expect, v, got int, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: id, Input: Input{Put: true, Key: key, Value: v, Expect: expect}, Call: call, Output: Output{Value: got}, Return: ret}
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
		{"reads follow acknowledged writes", []porcupine.Operation{
			put(0, "a", 0, 1, 0, 10), get(1, "a", 1, 11, 12), put(0, "a", 1, 2, 13, 20), get(1, "a", 2, 21, 22),
		}, porcupine.Ok},
		{"a concurrent read may see either value", []porcupine.Operation{
			put(0, "a", 0, 1, 0, 10), put(0, "a", 1, 2, 11, 20), get(1, "a", 1, 12, 13),
		}, porcupine.Ok},
		{"an acknowledged write lost", []porcupine.Operation{
			put(0, "a", 0, 1, 0, 10), put(0, "a", 1, 2, 11, 20), get(1, "a", 1, 21, 22),
		}, porcupine.Illegal},
		{"a failed write may take effect later", []porcupine.Operation{
			put(0, "a", 0, 1, 0, 10), failedPut(0, "a", 1, 2, 11), get(1, "a", 1, 30, 31), get(1, "a", 2, 40, 41),
		}, porcupine.Ok},
		{"a failed write may never take effect", []porcupine.Operation{
			put(0, "a", 0, 1, 0, 10), failedPut(0, "a", 1, 2, 11), get(1, "a", 1, 30, 31),
		}, porcupine.Ok},
		{"a value never written", []porcupine.Operation{
			put(0, "a", 0, 1, 0, 10), get(1, "a", 7, 11, 12),
		}, porcupine.Illegal},
		{"a failed try that took effect shows in the next compare", []porcupine.Operation{
			failedPut(0, "a", 0, 1, 0), comparedFalse(0, "a", 0, 2, 1, 5, 10), put(0, "a", 1, 3, 11, 20), get(1, "a", 3, 30, 31),
		}, porcupine.Ok},
		{"a failed try cannot take effect once the next write set the key", []porcupine.Operation{
			failedPut(0, "a", 0, 1, 0), put(0, "a", 0, 2, 5, 10), put(0, "a", 2, 3, 11, 20), get(1, "a", 1, 30, 31),
		}, porcupine.Illegal},
		{"a false compare must read the value there", []porcupine.Operation{
			put(0, "a", 0, 1, 0, 10), comparedFalse(0, "a", 0, 2, 7, 11, 20),
		}, porcupine.Illegal},
		{"a compare of the value there is not false", []porcupine.Operation{
			put(0, "a", 0, 1, 0, 10), comparedFalse(0, "a", 1, 2, 1, 11, 20),
		}, porcupine.Illegal},
		{"a write set from a value the key did not hold", []porcupine.Operation{
			put(0, "a", 0, 1, 0, 10), put(0, "a", 5, 2, 11, 20),
		}, porcupine.Illegal},
		{"keys are independent", []porcupine.Operation{
			put(0, "a", 0, 1, 0, 10), put(1, "b", 0, 5, 0, 10), get(0, "b", 5, 11, 12), get(1, "a", 1, 11, 12),
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
// value from the same compare; a false compare reads what an earlier try
// set, and the next try compares that; an error not worth asking again
// ends the write, counted as failed.
func TestPutAsksAgainWithANewValue(t *testing.T) {
	type try struct{ expect, v int }
	w := &Writer{start: time.Now()}
	var tried []try
	type answer struct {
		set bool
		got int
		err error
	}
	// cur 3, and 4 was tried before and failed: it took effect.
	answers := []answer{{err: rpctypes.ErrTimeout}, {got: 4}, {err: rpctypes.ErrLeaderChanged}, {set: true}}
	cur, last := w.put(context.Background(), 0, "k", 3, 4, func(_ context.Context, expect, v int) (bool, int, error) {
		tried = append(tried, try{expect, v})
		a := answers[0]
		answers = answers[1:]
		if a.set {
			a.got = v
		}
		return a.set, a.got, a.err
	})
	assert.Equal(t, 8, cur)
	assert.Equal(t, 8, last)
	assert.Equal(t, []try{{3, 5}, {3, 6}, {4, 7}, {4, 8}}, tried)
	require.Len(t, w.hist, 4)
	want := []Output{{Unknown: true}, {Value: 4}, {Unknown: true}, {Value: 8, Set: true}}
	for i, op := range w.hist {
		in := op.Input.(Input)
		assert.Equal(t, tried[i], try{in.Expect, in.Value}, "try %d", i)
		assert.Equal(t, want[i], op.Output, "try %d", i)
		assert.Equal(t, want[i].Unknown, op.Return == math.MaxInt64, "try %d", i)
	}
	assert.Zero(t, w.failed, "a write set in the end did not fail")

	w = &Writer{start: time.Now()}
	cur, last = w.put(context.Background(), 0, "k", 0, 0, func(context.Context, int, int) (bool, int, error) {
		return false, 0, errors.New("connection refused")
	})
	assert.Equal(t, 0, cur, "a failed write changes nothing the worker knows")
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
	w.put(ctx, 0, "k", 0, 0, func(octx context.Context, _, _ int) (bool, int, error) {
		cancel() // the writer stops while the write is under way
		<-octx.Done()
		return false, 0, octx.Err()
	})
	require.Len(t, w.hist, 1)
	assert.Equal(t, Output{Unknown: true, Stopped: true}, w.hist[0].Output)
	assert.Zero(t, w.failed)

	w = &Writer{start: time.Now()}
	w.put(context.Background(), 0, "k", 0, 0, func(context.Context, int, int) (bool, int, error) {
		return false, 0, errors.New("connection refused")
	})
	require.Len(t, w.hist, 1)
	assert.Equal(t, Output{Unknown: true}, w.hist[0].Output)
	assert.Equal(t, 1, w.failed)
}
