package ec2sim

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"
)

// Limits are EC2's API request rate limits. PerAction is EC2's own model (a token bucket per API action,
// sized by the action's category); the class buckets (one for every mutating action, one for every other)
// are the coarser model earlier tests were written against, used only when PerAction is nil. Zero class
// rates mean unlimited.
type Limits struct {
	MutatingRate  float64 `json:"mutatingRate,omitempty"`
	MutatingBurst int     `json:"mutatingBurst,omitempty"`
	DescribeRate  float64 `json:"describeRate,omitempty"`
	DescribeBurst int     `json:"describeBurst,omitempty"`
	// PerAction, when set, throttles as EC2 does and the class buckets above are not used.
	PerAction *Throttling `json:"perAction,omitempty"`
}

// EC2Limits are EC2's default account limits: its per-action request throttling at the documented numbers.
func EC2Limits() Limits {
	return Limits{PerAction: &Throttling{}}
}

// Bucket is a token bucket: Capacity tokens when full, Refill tokens added per second.
type Bucket struct {
	Capacity float64 `json:"capacity"`
	Refill   float64 `json:"refill"`
}

// Throttling is EC2's request rate limiting ("Request throttling for the Amazon EC2 API", EC2 Developer
// Guide): every API action has a bucket of its own, sized by its category or, for the uncategorized actions,
// by its own line of the table; a Describe of the unfiltered subset asked without a filter or pagination
// takes from a smaller bucket of that action. The zero value is EC2's numbers.
type Throttling struct {
	// CapacityScale multiplies every bucket's capacity (zero: 1). A bucket always holds at least one token.
	CapacityScale float64 `json:"capacityScale,omitempty"`
	// RefillScale multiplies every bucket's refill rate (zero: 1), as TimeScale shortens EC2's delays.
	RefillScale float64 `json:"refillScale,omitempty"`
	// Buckets replaces, unscaled, the bucket of a category (CategoryMutating, CategoryNonMutating,
	// CategoryUnfiltered) or of one action ("CreateVolume"); an action's entry wins over its category's.
	Buckets map[string]Bucket `json:"buckets,omitempty"`
}

// The request throttling categories ec2sim's actions fall in.
const (
	CategoryMutating    = "mutating"
	CategoryNonMutating = "non-mutating"
	// CategoryUnfiltered is "unfiltered and unpaginated non-mutating actions".
	CategoryUnfiltered = "unfiltered-non-mutating"
	// categoryOwn is an uncategorized action: it has its own line in the table.
	categoryOwn = "uncategorized"
)

// categoryBuckets are the categories' sizes and refill rates in the table "Request token bucket sizes and
// refill rates" (read 2026-11-26). Resource-intensive and console actions are not among ec2sim's.
var categoryBuckets = map[string]Bucket{
	CategoryNonMutating: {Capacity: 100, Refill: 20},
	CategoryUnfiltered:  {Capacity: 50, Refill: 10},
	CategoryMutating:    {Capacity: 50, Refill: 5},
}

// ownBuckets are the "uncategorized actions" of that page among ec2sim's actions: mutating, but with their
// own sizes.
var ownBuckets = map[string]Bucket{
	"CreateSnapshot": {Capacity: 100, Refill: 5},
	"CreateTags":     {Capacity: 100, Refill: 10},
	"CreateVolume":   {Capacity: 100, Refill: 5},
	"DeleteSnapshot": {Capacity: 100, Refill: 5},
	"DeleteTags":     {Capacity: 100, Refill: 10},
	"DeleteVolume":   {Capacity: 100, Refill: 5},
}

// unfilteredSubset are the actions EC2 lists as taking from the smaller bucket when asked with neither a
// filter nor pagination (the page lists DescribeNetworkInterfaces, DescribeSecurityGroups and others too,
// which ec2sim does not serve).
var unfilteredSubset = map[string]bool{
	"DescribeInstances":      true,
	"DescribeInstanceStatus": true,
	"DescribeSnapshots":      true,
	"DescribeVolumes":        true,
}

// category is the throttling category of one request: the action, and for the unfiltered subset whether
// the request narrows or pages its answer.
func category(action string, mutating bool, f *form) string {
	switch {
	case ownBuckets[action] != Bucket{}:
		return categoryOwn
	case mutating:
		return CategoryMutating
	case unfilteredSubset[action] && !filteredOrPaginated(f):
		return CategoryUnfiltered
	default:
		return CategoryNonMutating
	}
}

// filteredOrPaginated reports a Filter.N, a NextToken or a MaxResults above zero (zero is read as "not
// given", as the Describe handlers do). A list of IDs is neither: EC2's page names only filters and
// pagination, so an ID list is counted as unfiltered, the stricter reading.
func filteredOrPaginated(f *form) bool {
	if f == nil {
		return false
	}
	for k := range f.values {
		if strings.HasPrefix(k, "Filter.") {
			return true
		}
	}
	if tok, _ := f.get("NextToken"); tok != "" {
		return true
	}
	n, ok, _ := f.integer("MaxResults")
	return ok && n > 0
}

func (t *Throttling) validate() error {
	if t.CapacityScale < 0 || t.RefillScale < 0 {
		return fmt.Errorf("throttling scales %v, %v: negative", t.CapacityScale, t.RefillScale)
	}
	for k, b := range t.Buckets {
		if b.Capacity < 0 || b.Refill < 0 {
			return fmt.Errorf("throttling bucket %s %+v: negative", k, b)
		}
	}
	return nil
}

// bucketFor is the bucket, scaled, of an action in a category.
func (t *Throttling) bucketFor(action, cat string) Bucket {
	if b, ok := t.Buckets[action]; ok {
		return b
	}
	if b, ok := t.Buckets[cat]; ok && cat != categoryOwn {
		return b
	}
	b := categoryBuckets[cat]
	if cat == categoryOwn {
		b = ownBuckets[action]
	}
	if t.CapacityScale > 0 {
		b.Capacity *= t.CapacityScale
	}
	if t.RefillScale > 0 {
		b.Refill *= t.RefillScale
	}
	return b
}

// limiter admits or throttles requests, by class or per action; its buckets are created on first use.
type limiter struct {
	clock func() time.Time

	mu                 sync.Mutex
	limits             Limits
	mutating, describe *bucket
	buckets            map[string]*bucket
}

func newLimiter(l Limits, clock func() time.Time) *limiter {
	lim := &limiter{clock: clock}
	lim.set(l)
	return lim
}

// set replaces the limits, with every bucket full.
func (l *limiter) set(lim Limits) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	l.limits = lim
	if lim.PerAction != nil {
		t := *lim.PerAction
		t.Buckets = maps.Clone(t.Buckets)
		l.limits.PerAction = &t
	}
	l.mutating = newBucket(Bucket{Capacity: float64(lim.MutatingBurst), Refill: lim.MutatingRate}, now)
	l.describe = newBucket(Bucket{Capacity: float64(lim.DescribeBurst), Refill: lim.DescribeRate}, now)
	l.buckets = map[string]*bucket{}
}

func (l *limiter) get() Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.limits
	if lim.PerAction != nil {
		t := *lim.PerAction
		t.Buckets = maps.Clone(t.Buckets)
		lim.PerAction = &t
	}
	return lim
}

// allow takes a token for the request from its bucket, or reports it throttled.
func (l *limiter) allow(action string, mutating bool, f *form) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	model := l.limits.PerAction
	if model == nil {
		if mutating {
			return l.mutating.take(now)
		}
		return l.describe.take(now)
	}
	cat := category(action, mutating, f)
	key := action
	if cat == CategoryUnfiltered {
		key += " unfiltered"
	}
	b, ok := l.buckets[key]
	if !ok {
		// Here a zero refill rate is a bucket that never refills, not an unlimited one.
		b = fullBucket(model.bucketFor(action, cat), now)
		l.buckets[key] = b
	}
	return b.take(now)
}

// bucket is one token bucket; nil admits everything. The limiter's lock guards it.
type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

// newBucket is a class bucket: full, or nil (unlimited) for a zero refill rate.
func newBucket(b Bucket, now time.Time) *bucket {
	if b.Refill <= 0 {
		return nil
	}
	return fullBucket(b, now)
}

// fullBucket is a bucket holding its capacity, at least one token.
func fullBucket(b Bucket, now time.Time) *bucket {
	burst := max(1, b.Capacity)
	return &bucket{rate: b.Refill, burst: burst, tokens: burst, last: now}
}

func (b *bucket) take(now time.Time) bool {
	if b == nil {
		return true
	}
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// SetLimits replaces the request rate limits, every bucket full; it fails on negative scales or buckets.
func (s *Server) SetLimits(l Limits) error {
	if l.PerAction != nil {
		if err := l.PerAction.validate(); err != nil {
			return fmt.Errorf("ec2sim: %w", err)
		}
	}
	s.limits.set(l)
	return nil
}

// Limits returns the request rate limits in force.
func (s *Server) Limits() Limits { return s.limits.get() }
