// Package config holds s3-controller's options: upstream aws-s3-csi-controller's flags (each defaulting to
// the environment variable upstream's chart sets) plus the leader election and HTTP flags Stowage adds.
package config

import (
	"flag"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// Defaults that upstream's chart passes and its binary leaves empty; Stowage makes them the binary's own.
const (
	DefaultPriorityClassName = "mount-s3-critical"
	DefaultCommand           = "/bin/aws-s3-csi-mounter"
	// LeaseName is upstream's leader election ID, so upstream and Stowage replicas elect one leader.
	LeaseName = "aws-s3-csi-controller"
	// DefaultStaleInterval is how often, and after how long, stale attachments are cleaned (upstream: 2 min).
	DefaultStaleInterval = 2 * time.Minute
)

// Config is everything s3-controller is started with.
type Config struct {
	Kubeconfig string

	// MountpointPod is what Mountpoint Pods are built from.
	MountpointPod MountpointPod

	LeaderElection          bool
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration

	MetricsAddress string
	HealthAddress  string
	Workers        int
	KubeAPIQPS     float64
	KubeAPIBurst   int

	// StaleInterval is both the stale attachment cleaner's period and the age an attachment must reach
	// before the cleaner drops it (upstream uses 2 minutes for both).
	StaleInterval time.Duration

	// CSIEndpoint, when set, is where the CSI controller service for dynamic provisioning listens (for a
	// csi-provisioner beside the controller); empty keeps upstream's controller without it.
	CSIEndpoint string
	// S3EndpointURL, S3Region and S3ForcePathStyle are how that service reaches S3 (credentials come from
	// the SDK's chain: AWS_ACCESS_KEY_ID..., IRSA, Pod Identity).
	S3EndpointURL    string
	S3Region         string
	S3ForcePathStyle bool

	// Raw JSON label/annotation flags, parsed by Parse.
	podLabelsJSON, podAnnotationsJSON, headroomLabelsJSON string
	pullPolicy                                            *string
}

// MountpointPod configures the Mountpoint Pods the controller creates.
type MountpointPod struct {
	Namespace                   string
	MountpointVersion           string
	PriorityClassName           string
	PreemptingPriorityClassName string
	HeadroomPriorityClassName   string
	Image                       string
	HeadroomImage               string
	ImagePullPolicy             corev1.PullPolicy
	Command                     string
	PodLabels                   map[string]string
	PodAnnotations              map[string]string
	HeadroomPodLabels           map[string]string
	// CSIDriverVersion goes into the mounted-by and created-by labels; Stowage's version.
	CSIDriverVersion string
}

// HeadroomEnabled is upstream's switch: both headroom priority classes set.
func (m MountpointPod) HeadroomEnabled() bool {
	return m.PreemptingPriorityClassName != "" && m.HeadroomPriorityClassName != ""
}

// Register adds every flag to fs and returns the Config they fill; call Parse after fs.Parse.
func Register(fs *flag.FlagSet, getenv func(string) string) *Config {
	c := &Config{}
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	m := &c.MountpointPod
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig; empty means in-cluster (or $KUBECONFIG).")
	fs.StringVar(&m.Namespace, "mountpoint-namespace", env("MOUNTPOINT_NAMESPACE", s3api.DefaultMountpointNamespace), "Namespace to spawn Mountpoint Pods in.")
	fs.StringVar(&m.MountpointVersion, "mountpoint-version", getenv("MOUNTPOINT_VERSION"), "Version of Mountpoint within the given Mountpoint image.")
	fs.StringVar(&m.PriorityClassName, "mountpoint-priority-class-name", env("MOUNTPOINT_PRIORITY_CLASS_NAME", DefaultPriorityClassName), "Priority class name of the Mountpoint Pods.")
	fs.StringVar(&m.PreemptingPriorityClassName, "mountpoint-preempting-priority-class-name", getenv("MOUNTPOINT_PREEMPTING_PRIORITY_CLASS_NAME"), "Preempting priority class name of the Mountpoint Pods (headroom feature).")
	fs.StringVar(&m.HeadroomPriorityClassName, "mountpoint-headroom-priority-class-name", getenv("MOUNTPOINT_HEADROOM_PRIORITY_CLASS_NAME"), "Priority class name of the Headroom Pods (headroom feature).")
	fs.StringVar(&m.Image, "mountpoint-image", getenv("MOUNTPOINT_IMAGE"), "Image of the Mountpoint Pods.")
	fs.StringVar(&m.HeadroomImage, "headroom-image", getenv("MOUNTPOINT_HEADROOM_IMAGE"), "Image of a pause container for Headroom Pods.")
	pull := fs.String("mountpoint-image-pull-policy", getenv("MOUNTPOINT_IMAGE_PULL_POLICY"), "Pull policy of the Mountpoint image.")
	fs.StringVar(&m.Command, "mountpoint-container-command", DefaultCommand, "Entrypoint command of the Mountpoint Pods.")
	fs.StringVar(&c.podLabelsJSON, "mountpoint-pod-labels", getenv("MOUNTPOINT_POD_LABELS"), "Labels for Mountpoint Pods (JSON object).")
	fs.StringVar(&c.podAnnotationsJSON, "mountpoint-pod-annotations", getenv("MOUNTPOINT_POD_ANNOTATIONS"), "Annotations for Mountpoint Pods (JSON object).")
	fs.StringVar(&c.headroomLabelsJSON, "mountpoint-headroom-pod-labels", getenv("MOUNTPOINT_HEADROOM_POD_LABELS"), "Labels for Headroom Pods (JSON object).")

	fs.BoolVar(&c.LeaderElection, "leader-election", true, "Run under leader election (Lease "+LeaseName+"); upstream always does.")
	fs.StringVar(&c.LeaderElectionNamespace, "leader-election-namespace", getenv("POD_NAMESPACE"), "Namespace of the Lease; empty means the service account's namespace.")
	fs.DurationVar(&c.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "Lease duration.")
	fs.DurationVar(&c.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader retries renewing.")
	fs.DurationVar(&c.RetryPeriod, "leader-election-retry-period", 2*time.Second, "Pause between election attempts.")
	fs.StringVar(&c.MetricsAddress, "metrics-bind-address", ":8080", "Address of the Prometheus /metrics endpoint; 0 disables it.")
	fs.StringVar(&c.HealthAddress, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; 0 disables it.")
	fs.IntVar(&c.Workers, "worker-threads", 4, "Concurrent reconciles of workload and Mountpoint Pods.")
	fs.Float64Var(&c.KubeAPIQPS, "kube-api-qps", 0, "Client QPS; 0 means no client-side limit (the API server's priority and fairness sets the pace).")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", 0, "Client burst; used with --kube-api-qps.")
	fs.DurationVar(&c.StaleInterval, "stale-attachment-interval", DefaultStaleInterval, "Period of the stale attachment cleaner and the age an attachment needs before it is dropped.")
	fs.StringVar(&c.CSIEndpoint, "csi-endpoint", "", "CSI socket (unix:///csi/csi.sock) of the controller service for dynamic provisioning, served for a csi-provisioner; empty turns it off.")
	fs.StringVar(&c.S3EndpointURL, "s3-endpoint-url", env("AWS_ENDPOINT_URL_S3", getenv("AWS_ENDPOINT_URL")), "URL of an S3-compatible server for dynamic provisioning; empty means AWS.")
	fs.StringVar(&c.S3Region, "s3-region", "", "Region for dynamic provisioning's S3 calls; empty means AWS_REGION, else us-east-1.")
	fs.BoolVar(&c.S3ForcePathStyle, "s3-force-path-style", false, "Address buckets as <endpoint>/<bucket> (most S3-compatible servers need it).")
	c.pullPolicy = pull
	return c
}

// Parse validates the flag values and decodes the JSON ones. Invalid label keys are dropped with a
// warning, as upstream does; a value that is not a JSON object is an error naming its flag.
func (c *Config) Parse(warn func(msg string, kv ...any)) error {
	m := &c.MountpointPod
	switch p := corev1.PullPolicy(*c.pullPolicy); p {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		m.ImagePullPolicy = p
	default:
		return fmt.Errorf("--mountpoint-image-pull-policy: %q is not Always, IfNotPresent or Never", p)
	}
	if m.Namespace == "" {
		return fmt.Errorf("--mountpoint-namespace (or MOUNTPOINT_NAMESPACE) is required")
	}
	if m.Command == "" {
		return fmt.Errorf("--mountpoint-container-command must not be empty")
	}
	var err error
	if m.PodLabels, err = ParseLabels(c.podLabelsJSON, warn); err != nil {
		return fmt.Errorf("--mountpoint-pod-labels: %w", err)
	}
	if m.PodAnnotations, err = ParseAnnotations(c.podAnnotationsJSON, warn); err != nil {
		return fmt.Errorf("--mountpoint-pod-annotations: %w", err)
	}
	if m.HeadroomPodLabels, err = ParseLabels(c.headroomLabelsJSON, warn); err != nil {
		return fmt.Errorf("--mountpoint-headroom-pod-labels: %w", err)
	}
	if c.Workers < 1 {
		return fmt.Errorf("--worker-threads must be at least 1, got %d", c.Workers)
	}
	if c.StaleInterval <= 0 {
		return fmt.Errorf("--stale-attachment-interval must be positive, got %s", c.StaleInterval)
	}
	return nil
}
