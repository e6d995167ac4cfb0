package helm

import (
	"reflect"
	"testing"
)

func TestMergeValuesDescendsIntoMapsBothHave(t *testing.T) {
	base := map[string]any{
		"image": map[string]any{"repository": "stowage/ebs-plugin", "tag": "e2e"},
		"node":  map[string]any{"containerSecurityContext": map[string]any{"privileged": true, "readOnlyRootFilesystem": true}},
		"args":  []string{"--a"},
	}
	over := map[string]any{
		"node":  map[string]any{"containerSecurityContext": map[string]any{"privileged": false}, "kubeletPath": "/k"},
		"args":  []string{"--b"},
		"image": "not a map: replaces the map",
	}
	want := map[string]any{
		"image": "not a map: replaces the map",
		"node": map[string]any{
			"containerSecurityContext": map[string]any{"privileged": false, "readOnlyRootFilesystem": true},
			"kubeletPath":              "/k",
		},
		"args": []string{"--b"},
	}
	if got := MergeValues(base, over); !reflect.DeepEqual(got, want) {
		t.Errorf("MergeValues = %v, want %v", got, want)
	}
}
