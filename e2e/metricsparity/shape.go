package metricsparity

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Shape is a scrape reduced to what queries depend on, by family name.
type Shape map[string]Family

// Family is one metric family's shape.
type Family struct {
	Type string
	// LabelSets are the distinct label-name sets of its series, each sorted and joined by ",".
	LabelSets []string
	// Buckets are a histogram's upper bounds (+Inf left out); nil for other types.
	Buckets []float64
	// Values are the distinct values of each label, for Compare's Values option.
	Values map[string][]string
}

// Parse reads a scrape in the Prometheus text format.
func Parse(text string) (Shape, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parsing the scrape: %w", err)
	}
	return fromFamilies(slices.Collect(maps.Values(families))), nil
}

// Gather is the shape of what g serves, for a reference registry built in the test process (component-base's
// global one, which upstream's sidecars serve).
func Gather(g prometheus.Gatherer) (Shape, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gathering: %w", err)
	}
	return fromFamilies(families), nil
}

func fromFamilies(families []*dto.MetricFamily) Shape {
	shape := Shape{}
	for _, mf := range families {
		name := mf.GetName()
		f := Family{Type: mf.GetType().String(), Values: map[string][]string{}}
		sets := map[string]bool{}
		values := map[string]map[string]bool{}
		for _, m := range mf.GetMetric() {
			var names []string
			for _, l := range m.GetLabel() {
				names = append(names, l.GetName())
				if values[l.GetName()] == nil {
					values[l.GetName()] = map[string]bool{}
				}
				values[l.GetName()][l.GetValue()] = true
			}
			slices.Sort(names)
			sets[strings.Join(names, ",")] = true
			if mf.GetType() == dto.MetricType_HISTOGRAM && f.Buckets == nil {
				f.Buckets = bounds(m.GetHistogram())
			}
		}
		f.LabelSets = slices.Sorted(maps.Keys(sets))
		for label, vs := range values {
			f.Values[label] = slices.Sorted(maps.Keys(vs))
		}
		shape[name] = f
	}
	return shape
}

// bounds are a histogram's finite upper bounds; the parser adds no +Inf bucket, but a serializer may.
func bounds(h *dto.Histogram) []float64 {
	out := []float64{}
	for _, b := range h.GetBucket() {
		if ub := b.GetUpperBound(); ub < 1e308 {
			out = append(out, ub)
		}
	}
	return out
}
