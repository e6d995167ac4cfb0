package config

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParseLabels reads the Mountpoint Pods' extra labels and annotations (the controller's JSON settings, from
// the Helm values): no panic; what is kept is what the API server takes on a Pod, outside the driver's own
// domain, with the value given; every key of a valid object is either kept or warned about, never lost quietly.
func FuzzParseLabels(f *testing.F) {
	for _, s := range []string{`{"team":"storage","example.com/tier":"gold"}`, `{"s3.csi.aws.com/mounted":"x"}`, `{"a b":"c"}`,
		`{"k":"v w"}`, `[]`, `{"k":1}`, ``, `  `, `null`, `{"k":"v","k":"w"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var in map[string]string
		valid := json.Unmarshal([]byte(raw), &in) == nil
		for _, tc := range []struct {
			parse func(string, func(string, ...any)) (map[string]string, error)
			value func(string) []string
		}{
			{ParseLabels, validation.IsValidLabelValue},
			{ParseAnnotations, func(string) []string { return nil }},
		} {
			warned := 0
			out, err := tc.parse(raw, func(string, ...any) { warned++ })
			if err != nil {
				if valid || strings.TrimSpace(raw) == "" {
					t.Fatalf("%q, a JSON object of strings, refused: %v", raw, err)
				}
				continue
			}
			for k, v := range out {
				if strings.HasPrefix(k, reservedPrefix) || len(validation.IsQualifiedName(k)) > 0 || len(tc.value(v)) > 0 || in[k] != v {
					t.Fatalf("%q: kept %q=%q", raw, k, v)
				}
			}
			if len(out)+warned != len(in) {
				t.Fatalf("%q: %d of %d keys kept and %d warned about", raw, len(out), len(in), warned)
			}
		}
	})
}
