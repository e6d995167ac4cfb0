package ec2sim

import (
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// maxListIndex bounds the N in `Name.N` keys. EC2's largest lists (1000 IDs) fit well inside it; a bigger index
// is refused instead of allocating for it.
const maxListIndex = 100000

// form is a decoded EC2 Query request: flat keys (`VolumeId.1`, `Filter.2.Value.1`) to their first value.
// Lists are read from it by prefix, so nesting of any depth is decoded the same way.
type form struct {
	values map[string]string
}

// decodeForm parses an application/x-www-form-urlencoded body. It never panics; malformed escapes are an error.
func decodeForm(body string) (*form, error) {
	q, err := url.ParseQuery(body)
	if err != nil {
		return nil, err
	}
	f := &form{values: make(map[string]string, len(q))}
	for k, v := range q {
		if len(v) > 0 {
			f.values[k] = v[0]
		}
	}
	return f, nil
}

func (f *form) get(key string) (string, bool) {
	v, ok := f.values[key]
	return v, ok
}

// parseIndex reads the N of a list key; only plain positive decimals up to maxListIndex count.
func parseIndex(s string) (int, bool) {
	if s == "" || len(s) > 6 || s[0] == '0' {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxListIndex {
		return 0, false
	}
	return n, true
}

// list returns the values of `prefix.N` ordered by N.
func (f *form) list(prefix string) []string {
	type entry struct {
		n int
		v string
	}
	var entries []entry
	p := prefix + "."
	for k, v := range f.values {
		rest, ok := strings.CutPrefix(k, p)
		if !ok {
			continue
		}
		if n, ok := parseIndex(rest); ok {
			entries = append(entries, entry{n, v})
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].n < entries[j].n })
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.v
	}
	return out
}

// group returns the members of a list of structures, `prefix.N.field...`, each as a form of its own fields,
// ordered by N.
func (f *form) group(prefix string) []*form {
	members := map[int]*form{}
	p := prefix + "."
	for k, v := range f.values {
		rest, ok := strings.CutPrefix(k, p)
		if !ok {
			continue
		}
		idx, field, ok := strings.Cut(rest, ".")
		if !ok || field == "" {
			continue
		}
		n, ok := parseIndex(idx)
		if !ok {
			continue
		}
		m := members[n]
		if m == nil {
			m = &form{values: map[string]string{}}
			members[n] = m
		}
		m.values[field] = v
	}
	keys := make([]int, 0, len(members))
	for n := range members {
		keys = append(keys, n)
	}
	sort.Ints(keys)
	out := make([]*form, len(keys))
	for i, n := range keys {
		out[i] = members[n]
	}
	return out
}

// str returns a string field, or "" when absent.
func (f *form) str(key string) string {
	return f.values[key]
}

// integer reads an optional integer field; EC2 names the field in its error when the value is not a number.
func (f *form) integer(key string) (int64, bool, *apiError) {
	v, ok := f.values[key]
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, false, errBadParam(lowerFirst(key), v)
	}
	return n, true, nil
}

// boolean reads an optional boolean field ("true"/"false", as the SDK sends them).
func (f *form) boolean(key string) (bool, *apiError) {
	v, ok := f.values[key]
	if !ok {
		return false, nil
	}
	switch strings.ToLower(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errBadParam(lowerFirst(key), v)
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// filter is one `Filter.N` with its `Value.M` list.
type filter struct {
	Name   string
	Values []string
}

func (f *form) filters() ([]filter, *apiError) {
	var out []filter
	for _, g := range f.group("Filter") {
		name := g.str("Name")
		if name == "" {
			return nil, errMissing("Filter.Name")
		}
		out = append(out, filter{Name: name, Values: g.list("Value")})
	}
	return out, nil
}

// tag is an EC2 resource tag; order is kept as given, as EC2 answers it.
type tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// tags reads `Tag.N.Key/Value` lists (CreateTags, DeleteTags, TagSpecification members).
func (f *form) tags(prefix string) ([]tag, *apiError) {
	var out []tag
	for _, g := range f.group(prefix) {
		k, ok := g.get("Key")
		if !ok {
			return nil, errMissing(prefix + ".Key")
		}
		out = append(out, tag{Key: k, Value: g.str("Value")})
	}
	return out, nil
}

// tagSpecs returns the tags of the TagSpecification members for resourceType, refusing other types.
func (f *form) tagSpecs(resourceType string) ([]tag, *apiError) {
	var out []tag
	for _, g := range f.group("TagSpecification") {
		rt := g.str("ResourceType")
		if rt != resourceType {
			return nil, errInvalidValue("'%s' is not a valid taggable resource type for this operation.", rt)
		}
		ts, err := g.tags("Tag")
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, validateTags(out)
}

func validateTags(ts []tag) *apiError {
	if len(ts) > 50 {
		return newError(400, "TagLimitExceeded", "The maximum number of tags per resource is 50.")
	}
	for _, t := range ts {
		if t.Key == "" || len(t.Key) > 128 {
			return errInvalidValue("Tag keys must be between 1 and 128 characters.")
		}
		if strings.HasPrefix(strings.ToLower(t.Key), "aws:") {
			return errInvalidValue("Tag keys starting with 'aws:' are reserved for internal use")
		}
		if len(t.Value) > 256 {
			return errInvalidValue("Tag values must be at most 256 characters.")
		}
	}
	return nil
}
