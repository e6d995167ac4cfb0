package conformance

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// SkipEntry is one spec (or family of specs) that cannot run on this rig, and why.
type SkipEntry struct {
	// Test is a regular expression on the spec's name.
	Test string `json:"test"`
	// Why says what the spec needs that this machine or rig lacks.
	Why string `json:"why"`
	// Filter keeps the specs from running (-ginkgo.skip): for specs that would fail or hang here rather
	// than skip themselves.
	Filter bool `json:"filter,omitempty"`
	re     *regexp.Regexp
}

// SkipList is testdata/skips.yaml.
type SkipList []SkipEntry

// ReadSkipList reads a skip list and refuses an entry without a reason or with a broken expression.
func ReadSkipList(path string) (SkipList, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read skip list: %w", err)
	}
	var l SkipList
	if err := yaml.UnmarshalStrict(data, &l); err != nil {
		return nil, fmt.Errorf("parse skip list %s: %w", path, err)
	}
	for i := range l {
		if l[i].Why == "" {
			return nil, fmt.Errorf("skip list %s: entry %q says not why it is skipped", path, l[i].Test)
		}
		if l[i].re, err = regexp.Compile(l[i].Test); err != nil {
			return nil, fmt.Errorf("skip list %s: entry %d: %w", path, i+1, err)
		}
	}
	return l, nil
}

// Match returns the entry whose expression matches name.
func (l SkipList) Match(name string) (SkipEntry, bool) {
	for _, e := range l {
		if e.re != nil && e.re.MatchString(name) {
			return e, true
		}
	}
	return SkipEntry{}, false
}

// Regex returns the entries to filter as one expression for e2e.test's -ginkgo.skip ("" if none).
func (l SkipList) Regex() string {
	var parts []string
	for _, e := range l {
		if e.Filter {
			parts = append(parts, "("+e.Test+")")
		}
	}
	return strings.Join(parts, "|")
}

// frameworkSkips are the reasons the storage framework itself skips a spec: the driver file claims no such
// capability, fs type or volume type; the pattern cannot apply to the suite; or the cluster has too few
// nodes or zones. Each is one of the framework's own skip messages (test/e2e/storage/testsuites and
// external), worded as it words them; any other skip needs an entry in the skip list.
var frameworkSkips = []*regexp.Regexp{
	// A capability, fs type, volume type or mode the driver file does not claim, or a driver interface the
	// external driver does not implement.
	regexp.MustCompile(`^Driver "?[^ ]+"? (does not|doesn't) (support|implement|specify|define|provide|publish) `),
	regexp.MustCompile(`^Driver "?[^ ]+"? only supports `),
	regexp.MustCompile(`^Driver "?[^ ]+"? on volume type \S+ doesn't support readOnly source$`),
	regexp.MustCompile(`^Driver "?[^ ]+"? has no configured VolumeAttributesClass`),
	regexp.MustCompile(`^Driver "?[^ ]+"? supports VolumeMountGroup, which is incompatible with this test`),
	regexp.MustCompile(`^Driver supports dynamic provisioning, skipping \S+ pattern$`),
	regexp.MustCompile(`^this driver does not support multiple PVs with the same volumeHandle$`),
	regexp.MustCompile(`^\S+ does not have any InlineVolumeAttributes defined$`),
	regexp.MustCompile(`^Suite "[^"]+" does not support `),
	// The pattern does not apply to the suite's spec.
	regexp.MustCompile(`^Filesystem volume case should be covered by block volume case`),
	regexp.MustCompile(`^Block volumes do not support mount options`),
	regexp.MustCompile(`^raw block volumes cannot be read-only$`),
	regexp.MustCompile(`^This test doesn't work with pre-provisioned volume`),
	regexp.MustCompile(`^Test (for Block volumes is not implemented|is not valid for Block volume mode|does not support non-filesystem volume mode)`),
	regexp.MustCompile(`^skipping multiple PV mount test for block mode$`),
	regexp.MustCompile(`^Skipping \S+ test for expansion$`),
	regexp.MustCompile(`^volume type "[^"]+" is (not )?ephemeral$`),
	regexp.MustCompile(`^(WaitForFirstConsumer binding mode currently not supported|VolumeBindingMode immediate is not compatible with a multi-topology environment|Multiple generic ephemeral volumes with immediate binding)`),
	// Node and zone counts.
	regexp.MustCompile(`^Number of available nodes is less than \d+`),
	regexp.MustCompile(`^No topology with at least \d+ nodes found`),
	regexp.MustCompile(`^Not enough topologies in cluster`),
}

// FrameworkSkip says whether a skip message is one of the framework's own.
func FrameworkSkip(message string) bool {
	for _, re := range frameworkSkips {
		if re.MatchString(message) {
			return true
		}
	}
	return false
}

// Verdict sorts the results: failures, skips neither the framework's nor listed (unexplained), and the
// listed skips with their reasons, whether the framework skipped them at run time or -ginkgo.skip kept them
// from running.
type Verdict struct {
	Failed      []Result
	Unexplained []Result
	Listed      []Result
}

// Judge applies the rule of the run to results; focus is the run's -ginkgo.focus, which tells a listed spec
// kept from running from one outside the run.
func Judge(results []Result, focus *regexp.Regexp, skips SkipList) Verdict {
	var v Verdict
	for _, r := range results {
		switch r.Status {
		case Failed:
			v.Failed = append(v.Failed, r)
		case NotRun:
			if _, ok := skips.Match(r.Name); ok && focus.MatchString(r.Name) {
				v.Listed = append(v.Listed, r)
			}
		case Skipped:
			if FrameworkSkip(r.Message) {
				continue
			}
			if _, ok := skips.Match(r.Name); ok {
				v.Listed = append(v.Listed, r)
				continue
			}
			v.Unexplained = append(v.Unexplained, r)
		}
	}
	return v
}

// Err is nil when nothing failed and every skip is explained.
func (v Verdict) Err() error {
	var errs []error
	for _, r := range v.Failed {
		errs = append(errs, fmt.Errorf("failed: %s: %s", r.Name, r.Message))
	}
	for _, r := range v.Unexplained {
		errs = append(errs, fmt.Errorf("skipped, neither by the framework nor in the skip list: %s: %s", r.Name, r.Message))
	}
	return errors.Join(errs...)
}
