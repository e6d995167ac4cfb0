// Package metricsparity compares what two processes serve on /metrics by shape: the metric families, the
// label names of their series and the bucket bounds of their histograms, and for chosen labels their values.
// The metrics-parity tests scrape a Stowage binary and its upstream peer after the same scenario and require
// the same shape, so a dashboard or alert written against upstream finds every series it queries.
package metricsparity
