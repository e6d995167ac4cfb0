package ec2sim

import (
	"encoding/base64"
	"sort"
	"strings"
)

// matchFilters applies EC2 filter semantics: every filter must match (AND), any of a filter's values may
// match (OR), and values may use the wildcards * and ?. values returns the resource's values for a filter
// name, and false for a name the resource does not support.
func matchFilters(filters []filter, values func(name string) ([]string, bool)) (bool, *apiError) {
	for _, f := range filters {
		have, ok := values(f.Name)
		if !ok {
			return false, errInvalidValue("The filter '%s' is invalid", f.Name)
		}
		if !anyMatch(f.Values, have) {
			return false, nil
		}
	}
	return true, nil
}

func anyMatch(patterns, have []string) bool {
	for _, p := range patterns {
		for _, h := range have {
			if wildcardMatch(p, h) {
				return true
			}
		}
	}
	return false
}

// wildcardMatch matches s against p where * is any run and ? any one character (iterative, no recursion, so
// adversarial patterns stay linear-ish).
func wildcardMatch(p, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// tagFilterValues answers the tag filters every taggable resource supports.
func tagFilterValues(tags []tag, name string) ([]string, bool) {
	switch {
	case strings.HasPrefix(name, "tag:"):
		if v, ok := findTag(tags, strings.TrimPrefix(name, "tag:")); ok {
			return []string{v}, true
		}
		return nil, true
	case name == "tag-key":
		out := make([]string, len(tags))
		for i, t := range tags {
			out[i] = t.Key
		}
		return out, true
	case name == "tag-value":
		out := make([]string, len(tags))
		for i, t := range tags {
			out[i] = t.Value
		}
		return out, true
	}
	return nil, false
}

// paging reads MaxResults and NextToken. max is 0 when the caller asked for everything.
type paging struct {
	max   int
	after string
}

func readPaging(f *form, lo, hi int, idsGiven bool) (paging, *apiError) {
	var p paging
	n, set, aerr := f.integer("MaxResults")
	if aerr != nil {
		return p, aerr
	}
	// An explicit MaxResults=0 is what the SDK puts on the wire for aws.Int32(0), and what aws-ebs-csi-driver
	// sends for ListSnapshots without max_entries (pkg/cloud/cloud.go ListSnapshots: MaxResults:
	// aws.Int32(maxResults), refusing only 1-4), which works against EC2: EC2 reads 0 as "not given". See
	// README.md.
	if set && n == 0 {
		set = false
	}
	if set {
		if idsGiven {
			return p, errCombination("The parameter maxResults cannot be used with a list of IDs.")
		}
		if n < int64(lo) || n > int64(hi) {
			return p, errInvalidValue("Value ( %d ) for parameter maxResults is invalid. Parameter must be between %d and %d.", n, lo, hi)
		}
		p.max = int(n)
	}
	if tok := f.str("NextToken"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(b) == 0 {
			return p, errInvalidValue("Invalid value '%s' for nextToken.", tok)
		}
		p.after = string(b)
	}
	return p, nil
}

// pageOf returns the page of ids (sorted here) after p.after, and the token for the next page. The token is
// the last ID served, so pages stay consistent while resources come and go.
func pageOf(ids []string, p paging) ([]string, string) {
	sort.Strings(ids)
	start := 0
	if p.after != "" {
		start = sort.SearchStrings(ids, p.after)
		if start < len(ids) && ids[start] == p.after {
			start++
		}
	}
	ids = ids[start:]
	if p.max == 0 || len(ids) <= p.max {
		return ids, ""
	}
	ids = ids[:p.max]
	return ids, base64.RawURLEncoding.EncodeToString([]byte(ids[len(ids)-1]))
}

// checkIDs refuses malformed IDs the way EC2 does, before looking anything up.
func checkIDs(ids []string, prefix, code string) *apiError {
	for _, id := range ids {
		rest, ok := strings.CutPrefix(id, prefix+"-")
		if !ok || rest == "" || strings.Trim(rest, "0123456789abcdef") != "" {
			return newError(400, code, "Invalid id: \"%s\" (expecting \"%s-...\")", id, prefix)
		}
	}
	return nil
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// missingIDs returns, in order, the ids for which has is false: EC2's NotFound errors name every one of them.
func missingIDs(ids []string, has func(id string) bool) []string {
	var missing []string
	for _, id := range ids {
		if !has(id) {
			missing = append(missing, id)
		}
	}
	return missing
}

// uniqueIDs drops repeated IDs, keeping the first of each, as EC2 answers a named resource once.
func uniqueIDs(ids []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// mapKeys returns the keys of a resource map, the candidates of a describe call that names no IDs.
func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// selection is how a Describe* call turns its ID list and filters into the IDs it answers.
type selection struct {
	param    string                        // the form list that names IDs, e.g. "VolumeId"
	check    func(ids []string) *apiError  // refuses malformed IDs before anything is looked up
	exists   func(id string) bool          // whether a named ID exists
	notFound func(ids ...string) *apiError // the error naming every missing ID
	// named, when set, checks the named IDs further once they all exist.
	named  func(ids []string) *apiError
	all    func() []string                        // the candidates when no ID is named
	values func(id, name string) ([]string, bool) // a candidate's values for a filter name
}

// run returns the candidates that pass the filters, and whether the call named IDs (which rules out paging).
func (sel selection) run(f *form) ([]string, bool, *apiError) {
	named := f.list(sel.param)
	if aerr := sel.check(named); aerr != nil {
		return nil, false, aerr
	}
	filters, aerr := f.filters()
	if aerr != nil {
		return nil, false, aerr
	}
	var candidates []string
	if len(named) > 0 {
		candidates = uniqueIDs(named)
		if missing := missingIDs(candidates, sel.exists); len(missing) > 0 {
			return nil, false, sel.notFound(missing...)
		}
		if sel.named != nil {
			if aerr := sel.named(candidates); aerr != nil {
				return nil, false, aerr
			}
		}
	} else {
		candidates = sel.all()
	}
	selected, aerr := matching(candidates, filters, sel.values)
	return selected, len(named) > 0, aerr
}

// matching keeps the candidates whose values pass every filter.
func matching(candidates []string, filters []filter, values func(id, name string) ([]string, bool)) ([]string, *apiError) {
	var out []string
	for _, id := range candidates {
		ok, aerr := matchFilters(filters, func(name string) ([]string, bool) { return values(id, name) })
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			out = append(out, id)
		}
	}
	return out, nil
}

// page runs the selection and answers the page of IDs a Describe* call asked for, MaxResults being between lo
// and hi, with the token for the next page.
func (sel selection) page(r *request, lo, hi int) ([]string, string, *apiError) {
	selected, idsGiven, aerr := sel.run(r.form)
	if aerr != nil {
		return nil, "", aerr
	}
	return r.page(selected, lo, hi, idsGiven)
}

// page reads MaxResults (between lo and hi), NextToken and DryRun, and returns the page of ids to answer with
// the token for the next one.
func (r *request) page(ids []string, lo, hi int, idsGiven bool) ([]string, string, *apiError) {
	p, aerr := readPaging(r.form, lo, hi, idsGiven)
	if aerr != nil {
		return nil, "", aerr
	}
	if aerr := r.stopIfDryRun(); aerr != nil {
		return nil, "", aerr
	}
	page, next := pageOf(ids, p)
	return page, next, nil
}
