// Package nvmemetrics serves upstream's EBS NVMe statistics on the node: at each scrape it reads the EBS
// vendor log page of every EBS NVMe device backing a CSI mount and exports its counters, queue length and
// latency histograms per volume, with upstream's metric names, help, labels and bucket bounds, so the
// dashboards written for aws-ebs-csi-driver's node keep working.
package nvmemetrics
