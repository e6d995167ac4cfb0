package helm

import (
	"reflect"
	"testing"
)

func TestMergeValuesSetsOverDescendingIntoSharedMaps(t *testing.T) {
	tests := []struct {
		name       string
		base, over map[string]any
		want       map[string]any
	}{
		{
			name: "a leaf of a nested map replaced, its siblings kept",
			base: map[string]any{"controller": map[string]any{"image": map[string]any{"repository": "r", "tag": "e2e"}, "replicas": 1}},
			over: map[string]any{"controller": map[string]any{"image": map[string]any{"tag": "v2"}}},
			want: map[string]any{"controller": map[string]any{"image": map[string]any{"repository": "r", "tag": "v2"}, "replicas": 1}},
		},
		{
			name: "a key only over has is added",
			base: map[string]any{"image": "a"},
			over: map[string]any{"node": map[string]any{"logLevel": 5}},
			want: map[string]any{"image": "a", "node": map[string]any{"logLevel": 5}},
		},
		{
			name: "a map over a scalar and a scalar over a map replace it whole",
			base: map[string]any{"a": "scalar", "b": map[string]any{"x": 1}},
			over: map[string]any{"a": map[string]any{"y": 2}, "b": false},
			want: map[string]any{"a": map[string]any{"y": 2}, "b": false},
		},
		{
			name: "lists are replaced, not appended",
			base: map[string]any{"args": []string{"--a"}},
			over: map[string]any{"args": []string{"--b"}},
			want: map[string]any{"args": []string{"--b"}},
		},
		{
			name: "no values over leave base as it is",
			base: map[string]any{"image": "a"},
			want: map[string]any{"image": "a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := MergeValues(tc.base, tc.over); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("MergeValues = %v, want %v", got, tc.want)
			}
		})
	}
}
