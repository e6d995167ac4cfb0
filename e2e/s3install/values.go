package s3install

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
