package ebsstack

import (
	"context"
	"errors"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestDeleteAll(t *testing.T) {
	gone := apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "b")
	failure := errors.New("refused")
	tests := []struct {
		name      string
		delErr    map[string]error
		wantNames []string
		wantErr   error
	}{
		{name: "deletes each and returns the names", wantNames: []string{"a", "b", "c"}},
		{name: "one already gone counts as deleted", delErr: map[string]error{"b": gone}, wantNames: []string{"a", "b", "c"}},
		{name: "stops at a failed delete", delErr: map[string]error{"b": failure}, wantErr: failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := func(context.Context) ([]string, error) { return []string{"a", "b", "c"}, nil }
			var deleted []string
			del := func(_ context.Context, name string) error {
				deleted = append(deleted, name)
				return tt.delErr[name]
			}
			names, err := deleteAll(context.Background(), list, del)
			if !errors.Is(err, tt.wantErr) || !slices.Equal(names, tt.wantNames) {
				t.Fatalf("deleteAll = %v, %v; want %v, %v", names, err, tt.wantNames, tt.wantErr)
			}
			if tt.wantErr == nil && !slices.Equal(deleted, tt.wantNames) {
				t.Errorf("deleted %v, want %v", deleted, tt.wantNames)
			}
		})
	}
}
