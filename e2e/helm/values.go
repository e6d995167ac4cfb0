package helm

// MergeValues sets over's values on base, descending into the maps both have, as Helm merges a values file
// over the chart's, and returns base. A test's few keys thus change one value without restating its siblings.
func MergeValues(base, over map[string]any) map[string]any {
	for k, v := range over {
		b, bok := base[k].(map[string]any)
		o, ook := v.(map[string]any)
		if bok && ook {
			base[k] = MergeValues(b, o)
			continue
		}
		base[k] = v
	}
	return base
}
