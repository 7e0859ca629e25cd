package kvwriter

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
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
