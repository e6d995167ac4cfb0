// Package metadata tells the node plugin which instance it runs on: from the EC2 instance metadata service
// (IMDSv2, via the SDK, which honours AWS_EC2_METADATA_SERVICE_ENDPOINT) or from the Kubernetes Node object.
// Neither source needs AWS credentials, so node mode runs without them.
package metadata

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/klog/v2"
)

// Instance is what the node plugin needs to know about its instance.
type Instance struct {
	InstanceID       string
	InstanceType     string
	Region           string
	AvailabilityZone string
	OutpostARN       string
	// EBSMappings counts the EBS volumes in the instance's block-device-mapping beyond the root volume
	// (attached at launch, not by CSI). Negative means unknown.
	EBSMappings int
	// ENIs is the number of network interfaces. Zero means unknown.
	ENIs int
}

// Source is one way of learning the instance.
type Source interface {
	Name() string
	Get(ctx context.Context) (*Instance, error)
}

// Sources are tried in order; the first one that answers wins.
type Sources []Source

// Get returns the first successful answer, or every source's error.
func (s Sources) Get(ctx context.Context) (*Instance, error) {
	var errs []error
	for _, src := range s {
		inst, err := src.Get(ctx)
		if err == nil {
			klog.FromContext(ctx).V(2).Info("Instance metadata loaded", "source", src.Name(), "instanceID", inst.InstanceID,
				"instanceType", inst.InstanceType, "zone", inst.AvailabilityZone)
			return inst, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", src.Name(), err))
	}
	if len(errs) == 0 {
		return nil, errors.New("no metadata source configured")
	}
	return nil, errors.Join(errs...)
}

// ParseSources parses --metadata-sources values ("imds,kubernetes"). Repeated flags merge in order, as
// upstream's slice flag does; a source named twice is tried once, at its first place.
func ParseSources(values ...string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, s := range values {
		for _, name := range strings.Split(s, ",") {
			name = strings.TrimSpace(name)
			switch name {
			case "":
				continue
			case "imds", "kubernetes":
			case "metadata-labeler":
				// Upstream's labeler-fed source reads labels the same Node object carries; it is served by
				// the kubernetes source here.
				name = "kubernetes"
			default:
				return nil, fmt.Errorf("--metadata-sources: unknown source %q (want imds, kubernetes)", name)
			}
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--metadata-sources: no source given")
	}
	return out, nil
}

// validInstanceID reports whether id is an EC2 instance ID, "i-" and 1 to 32 letters and digits: the node ID
// the node registers with, which ControllerPublish refuses in any other form.
func validInstanceID(id string) bool {
	rest, ok := strings.CutPrefix(id, "i-")
	return ok && rest != "" && len(rest) <= 32 && strings.IndexFunc(rest, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0
}
