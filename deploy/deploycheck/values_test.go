package deploycheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// valueEffect is what one upstream values key does in Stowage's chart: exactly one of check, fails or inert.
type valueEffect struct {
	// check verifies the key's effect, given the fixture's value for it, on the render of the whole fixture
	// (or, with alone, of the chart's defaults with only this key set, for a key that would hide others'
	// effects, such as one that removes a workload).
	check func(r rendered, val any) error
	alone bool
	// fails: the chart refuses the key; rendering the defaults with this key alone must fail naming it.
	fails bool
	// inert says why the key changes nothing, as upstream where it is read only with a key that fails, or
	// because what it configures does not exist in Stowage (the chart's values.yaml says so): rendering the
	// defaults with this key alone must render exactly the defaults.
	inert string
}

// valuesCase is one chart checked against the keys of one upstream chart's values (testdata/upstream-*-keys.yaml:
// each key by its dotted path, with upstream's default).
type valuesCase struct {
	chart, upstream, fixture string
	effects                  map[string]valueEffect
}

// rendered is one render's objects, looked up by Kind/name (namespaces vary with the values).
type rendered struct{ objs []*unstructured.Unstructured }

func (r rendered) find(target string) (*unstructured.Unstructured, error) {
	kind, name, _ := strings.Cut(target, "/")
	for _, o := range r.objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o, nil
		}
	}
	return nil, fmt.Errorf("%s is not rendered", target)
}

// get returns the value at path in target: dot-separated fields, a list element chosen by [field=value]
// (e.g. spec.template.spec.containers[name=ebs-plugin].args).
func (r rendered) get(target, path string) (any, error) {
	o, err := r.find(target)
	if err != nil {
		return nil, err
	}
	var cur any = o.Object
	for _, seg := range strings.Split(path, ".") {
		field, sel, hasSel := strings.Cut(seg, "[")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %s: %s is not an object", target, path, field)
		}
		if cur, ok = m[field]; !ok {
			return nil, fmt.Errorf("%s: %s: no %s", target, path, field)
		}
		if !hasSel {
			continue
		}
		k, v, _ := strings.Cut(strings.TrimSuffix(sel, "]"), "=")
		list, _ := cur.([]any)
		cur = nil
		for _, e := range list {
			if em, ok := e.(map[string]any); ok && fmt.Sprint(em[k]) == v {
				cur = e
			}
		}
		if cur == nil {
			return nil, fmt.Errorf("%s: %s: no element %s", target, path, sel)
		}
	}
	return cur, nil
}

// normal is v as JSON decodes it, so YAML's and the render's numbers and maps compare equal.
func normal(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unmarshalable %T", v)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return fmt.Sprintf("undecodable %s", data)
	}
	return out
}

func equal(a, b any) bool { return reflect.DeepEqual(normal(a), normal(b)) }

const podSpec = "spec.template.spec"

// at: the value at path is the key's value.
func at(target, path string) func(rendered, any) error {
	return func(r rendered, val any) error {
		got, err := r.get(target, path)
		if err != nil {
			return err
		}
		if !equal(got, val) {
			return fmt.Errorf("%s %s is %v, want %v", target, path, normal(got), normal(val))
		}
		return nil
	}
}

// holds: the list at path holds every element of the key's value (a list), or the value itself.
func holds(target, path string) func(rendered, any) error {
	return func(r rendered, val any) error {
		got, err := r.get(target, path)
		if err != nil {
			return err
		}
		list, _ := normal(got).([]any)
		want, ok := normal(val).([]any)
		if !ok {
			want = []any{normal(val)}
		}
		for _, w := range want {
			if !slices.ContainsFunc(list, func(e any) bool { return reflect.DeepEqual(e, w) }) {
				return fmt.Errorf("%s %s = %v lacks %v", target, path, list, w)
			}
		}
		return nil
	}
}

// holdsMap: the map at path holds every entry of the key's value.
func holdsMap(target, path string) func(rendered, any) error {
	return func(r rendered, val any) error {
		got, err := r.get(target, path)
		if err != nil {
			return err
		}
		m, _ := normal(got).(map[string]any)
		want, _ := normal(val).(map[string]any)
		if len(want) == 0 {
			return fmt.Errorf("the fixture's value %v is not a non-empty map", val)
		}
		for k, w := range want {
			if !reflect.DeepEqual(m[k], w) {
				return fmt.Errorf("%s %s[%s] is %v, want %v", target, path, k, m[k], w)
			}
		}
		return nil
	}
}

// arg: a container of target has the argument format renders with the key's value.
func arg(target, container, format string) func(rendered, any) error {
	return func(r rendered, val any) error {
		return holds(target, podSpec+".containers[name="+container+"].args")(r, fmt.Sprintf(format, val))
	}
}

// env: a container of target has the env var name with the key's value (or with value, when given).
func env(target, container, name string, value ...string) func(rendered, any) error {
	return func(r rendered, val any) error {
		want := fmt.Sprint(val)
		if len(value) > 0 {
			want = value[0]
		}
		return holds(target, podSpec+".containers[name="+container+"].env")(r, map[string]any{"name": name, "value": want})
	}
}

// absent: target is not rendered.
func absent(targets ...string) func(rendered, any) error {
	return func(r rendered, _ any) error {
		for _, t := range targets {
			if _, err := r.find(t); err == nil {
				return fmt.Errorf("%s is rendered", t)
			}
		}
		return nil
	}
}

// all: every check holds.
func all(checks ...func(rendered, any) error) func(rendered, any) error {
	return func(r rendered, val any) error {
		for _, c := range checks {
			if err := c(r, val); err != nil {
				return err
			}
		}
		return nil
	}
}

// readValues reads a values file.
func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// fixtureKeys are the fixture's keys, cut where upstream has a key (so a map value is one key), and an error
// for each fixture path that is neither one of upstream's keys nor leads to one.
func fixtureKeys(fixture map[string]any, upKeys map[string]any) (map[string]any, []error) {
	out := map[string]any{}
	var errs []error
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, x := range m {
			key := prefix + k
			if _, ok := upKeys[key]; ok {
				out[key] = x
				continue
			}
			sub, isMap := x.(map[string]any)
			leads := false
			for u := range upKeys {
				leads = leads || strings.HasPrefix(u, key+".")
			}
			if !isMap || !leads {
				errs = append(errs, fmt.Errorf("fixture key %s is not in upstream's values", key))
				continue
			}
			walk(key+".", sub)
		}
	}
	walk("", fixture)
	return out, errs
}

// without returns values with the given keys deleted.
func without(values map[string]any, keys []string) map[string]any {
	out := normal(values).(map[string]any)
	for _, key := range keys {
		parts := strings.Split(key, ".")
		m := out
		for _, p := range parts[:len(parts)-1] {
			m, _ = m[p].(map[string]any)
		}
		if m != nil {
			delete(m, parts[len(parts)-1])
		}
	}
	return out
}

// only is the values holding just key, at val.
func only(key string, val any) map[string]any { return set(key, normal(val)) }

func renderValues(chart string, values map[string]any) ([]*unstructured.Unstructured, error) {
	return RenderChart(chartDir(chart), "stowage", "kube-system", values)
}

// checkValues checks one chart against one upstream values file: the fixture sets every key of upstream's
// values to a value other than upstream's default and no other key; every key has an entry in effects and
// every entry is a key; each entry's effect shows in the render.
func checkValues(t *testing.T, c valuesCase) {
	upKeys := readValues(t, filepath.Join("testdata", c.upstream))
	fixture := readValues(t, filepath.Join("testdata", c.fixture))
	fxKeys, errs := fixtureKeys(fixture, upKeys)
	for _, err := range errs {
		t.Error(err)
	}
	var keys []string
	for k := range upKeys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fv, ok := fxKeys[k]
		switch {
		case !ok:
			t.Errorf("upstream's key %s is not in testdata/%s", k, c.fixture)
		case equal(fv, upKeys[k]):
			t.Errorf("testdata/%s sets %s to upstream's default %v: it must show a change", c.fixture, k, normal(fv))
		}
		if _, ok := c.effects[k]; !ok {
			t.Errorf("upstream's key %s has no entry in the effects table", k)
		}
	}
	for k, e := range c.effects {
		if _, ok := upKeys[k]; !ok {
			t.Errorf("effects entry %s is not a key of upstream's values", k)
		}
		n := 0
		for _, set := range []bool{e.check != nil, e.fails, e.inert != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			t.Errorf("effects entry %s must have exactly one of check, fails, inert", k)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	defaults, err := renderValues(c.chart, nil)
	if err != nil {
		t.Fatal(err)
	}
	var skip []string // keys the whole-fixture render leaves out: refused, or checked alone
	for k, e := range c.effects {
		if e.fails || e.alone {
			skip = append(skip, k)
		}
	}
	whole, err := renderValues(c.chart, without(fixture, skip))
	if err != nil {
		t.Fatalf("render with testdata/%s (less the refused and alone keys): %v", c.fixture, err)
	}
	if _, err := Pods(whole); err != nil { // strict decoding: every value landed in a real field
		t.Errorf("render with testdata/%s: %v", c.fixture, err)
	}
	for _, k := range keys {
		e := c.effects[k]
		val := fxKeys[k]
		t.Run(k, func(t *testing.T) {
			switch {
			case e.fails:
				_, err := renderValues(c.chart, only(k, val))
				if err == nil || !strings.Contains(err.Error(), k) {
					t.Errorf("render with %s=%v alone: error %v, want one naming %s", k, normal(val), err, k)
				}
			case e.inert != "":
				objs, err := renderValues(c.chart, only(k, val))
				if err != nil {
					t.Fatal(err)
				}
				if !equal(objs, defaults) {
					t.Errorf("%s=%v changes the render, but is listed as without effect (%s)", k, normal(val), e.inert)
				}
			default:
				objs := whole
				if e.alone {
					if objs, err = renderValues(c.chart, only(k, val)); err != nil {
						t.Fatal(err)
					}
				}
				if err := e.check(rendered{objs}, val); err != nil {
					t.Errorf("%s=%v: %v", k, normal(val), err)
				}
			}
		})
	}
}

// TestValuesEBS: every key of upstream's aws-ebs-csi-driver chart 2.64.0 values means in stowage-ebs what it means
// upstream, or the render fails naming it.
func TestValuesEBS(t *testing.T) {
	checkValues(t, valuesCase{chart: "stowage-ebs", upstream: "upstream-ebs-keys.yaml",
		fixture: "ebs-values.yaml", effects: ebsValueEffects})
}

// TestValuesS3: every key of upstream's aws-mountpoint-s3-csi-driver chart 2.7.0 values means in stowage-s3 what it
// means upstream, or the render fails naming it.
func TestValuesS3(t *testing.T) {
	checkValues(t, valuesCase{chart: "stowage-s3", upstream: "upstream-s3-keys.yaml",
		fixture: "s3-values.yaml", effects: s3ValueEffects})
}

// TestValuesRefusedCombinations: values the charts refuse only in some forms or together fail naming the key.
func TestValuesRefusedCombinations(t *testing.T) {
	for _, c := range []struct {
		chart, key string
		values     map[string]any
	}{
		{"stowage-ebs", "node.metadataSources", set("node.metadataSources", "imds,metadata-labeler")},
		{"stowage-ebs", "node.volumeAttachLimit", set("node.volumeAttachLimit", 20, "node.reservedVolumeAttachments", 2)},
		{"stowage-ebs", "additionalDaemonSets.big.volumeAttachLimit", set("node.reservedVolumeAttachments", 2,
			"additionalDaemonSets", map[string]any{"big": map[string]any{"volumeAttachLimit": 15}})},
	} {
		t.Run(c.key, func(t *testing.T) {
			_, err := renderValues(c.chart, c.values)
			if err == nil || !strings.Contains(err.Error(), c.key) {
				t.Errorf("render: error %v, want one naming %s", err, c.key)
			}
		})
	}
}

// TestValuesUpstreamImageWithoutTag: upstream's image repository with an empty tag (upstream's chart's default,
// "the chart's release") runs the release Stowage names as upstream's, not a "latest" that may not exist.
func TestValuesUpstreamImageWithoutTag(t *testing.T) {
	objs, err := renderValues("stowage-ebs", set("image.repository", "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver", "image.tag", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.64.0"
	if err := at(ebsController, container("ebs-plugin")+".image")(rendered{objs}, want); err != nil {
		t.Error(err)
	}
}
