package s3install

import "github.com/stowage-csi/stowage/e2e/s3server"

// values are the chart's defaults but for the images: assembled here, never pulled.
func values() map[string]any {
	image := func(name string) map[string]any {
		return map[string]any{"repository": "stowage/" + name, "tag": ImageTag, "pullPolicy": "Never"}
	}
	return map[string]any{
		"image":         image("s3-node"),
		"controller":    map[string]any{"image": image("s3-controller")},
		"mountpointPod": map[string]any{"image": image("s3-mounter")},
		"sidecars": map[string]any{
			"nodeDriverRegistrar": map[string]any{"image": image("csi-node-driver-registrar")},
			"livenessProbe":       map[string]any{"image": image("livenessprobe")},
		},
	}
}

// provisionerValues turn on dynamic provisioning for an S3-compatible server at endpoint, as the chart's
// values describe: csi-provisioner (assembled here) beside s3-controller, which reaches the server with the
// aws-secret's keys, in the server's region and with path-style addressing (versitygw has no virtual hosts).
func provisionerValues(endpoint string) map[string]any {
	return map[string]any{
		"sidecars": map[string]any{"provisioner": map[string]any{
			"enabled": true,
			"image":   map[string]any{"repository": "stowage/csi-provisioner", "tag": ImageTag, "pullPolicy": "Never"},
		}},
		"controller": map[string]any{
			"env": []any{
				map[string]any{"name": "AWS_ENDPOINT_URL", "value": endpoint},
				map[string]any{"name": "AWS_REGION", "value": s3server.Region},
			},
			"additionalArgs": []any{"--s3-force-path-style"},
		},
	}
}
