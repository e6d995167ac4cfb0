package driver

import (
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/stowage-csi/stowage/s3-node/internal/mountoptions"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// Volume attributes, upstream's names, and the kubelet's pod info keys.
const (
	attrBucketName       = "bucketName"
	attrAuthSource       = "authenticationSource"
	attrSTSRegion        = "stsRegion"
	attrCache            = "cache"
	attrCacheSizeLimit   = "cacheEmptyDirSizeLimit"
	attrCacheMedium      = "cacheEmptyDirMedium"
	attrMountpointEnv    = "mountpointEnv."
	attrPrefix           = "prefix"
	ctxPodUID            = "csi.storage.k8s.io/pod.uid"
	ctxPodNamespace      = "csi.storage.k8s.io/pod.namespace"
	ctxServiceAccount    = "csi.storage.k8s.io/serviceAccount.name"
	ctxServiceAccountTok = "csi.storage.k8s.io/serviceAccount.tokens"
)

// allowedEnv are the only variables a volume may set for Mountpoint (upstream v2.6): a proxy, nothing
// that could change credentials or the endpoint behind the node's back.
var allowedEnv = map[string]bool{"HTTPS_PROXY": true, "NO_PROXY": true}

// volumeContext is the validated volume context.
type volumeContext struct {
	bucket, authSource, stsRegion                string
	prefix                                       string
	cacheAttr, cacheSize, cacheMedium            string
	podUID, podNamespace, serviceAccount, tokens string
	userEnv                                      map[string]string
	// ephemeral is a CSI inline volume of the Pod (the kubelet's csi.storage.k8s.io/ephemeral).
	ephemeral bool
}

func parseVolumeContext(vc, secrets map[string]string) (volumeContext, error) {
	v := volumeContext{
		bucket: vc[attrBucketName], authSource: vc[attrAuthSource], stsRegion: vc[attrSTSRegion],
		cacheAttr: vc[attrCache], cacheSize: vc[attrCacheSizeLimit], cacheMedium: vc[attrCacheMedium],
		podUID: vc[ctxPodUID], podNamespace: vc[ctxPodNamespace], serviceAccount: vc[ctxServiceAccount],
		tokens: vc[ctxServiceAccountTok], userEnv: map[string]string{}, prefix: vc[attrPrefix],
		ephemeral: vc[s3api.VolumeContextEphemeral] == "true",
	}
	// Kubernetes 1.35 (KEP-5538) may pass the tokens as secrets instead, which keeps them out of logs.
	if t := secrets[ctxServiceAccountTok]; t != "" {
		v.tokens = t
	}
	if v.bucket == "" {
		return v, fmt.Errorf("volume attribute %s is required", attrBucketName)
	}
	if err := checkPrefix(attrPrefix, "volume attribute", v.prefix); err != nil {
		return v, err
	}
	switch v.authSource {
	case "":
		v.authSource = s3api.AuthenticationSourceDriver
	case s3api.AuthenticationSourceDriver, s3api.AuthenticationSourcePod:
	default:
		return v, fmt.Errorf("volume attribute %s=%q: want %q or %q", attrAuthSource, v.authSource, s3api.AuthenticationSourceDriver, s3api.AuthenticationSourcePod)
	}
	// Whoever may create a Pod may write an inline volume: with the driver's credentials it could read any
	// bucket the driver can. Inline volumes therefore mount with the Pod's own ServiceAccount only.
	if v.ephemeral && v.authSource != s3api.AuthenticationSourcePod {
		return v, fmt.Errorf("volume attribute %s=%q: an inline (ephemeral) volume mounts with the Pod's own credentials only, set %s: %s",
			attrAuthSource, vc[attrAuthSource], attrAuthSource, s3api.AuthenticationSourcePod)
	}
	switch v.cacheAttr {
	case "", "emptyDir", "ephemeral":
	default:
		return v, fmt.Errorf("volume attribute %s=%q: want emptyDir or ephemeral", attrCache, v.cacheAttr)
	}
	switch v.cacheMedium {
	case "", "Memory":
	default:
		return v, fmt.Errorf("volume attribute %s=%q: want \"\" or Memory", attrCacheMedium, v.cacheMedium)
	}
	var refused []string
	for k, val := range vc {
		name, ok := strings.CutPrefix(k, attrMountpointEnv)
		if !ok {
			continue
		}
		if !allowedEnv[name] {
			refused = append(refused, k)
			continue
		}
		v.userEnv[name] = val
	}
	if len(refused) > 0 {
		sort.Strings(refused)
		return v, fmt.Errorf("volume attributes %s are not allowed: only %sHTTPS_PROXY and %sNO_PROXY", strings.Join(refused, ", "), attrMountpointEnv, attrMountpointEnv)
	}
	return v, nil
}

// checkPrefix accepts "" or a key prefix that ends with '/' (Mountpoint's rule) and does not start with
// one; what names it ("volume attribute", "mount option") goes into the error.
func checkPrefix(name, what, p string) error {
	if p == "" {
		return nil
	}
	if !strings.HasSuffix(p, "/") || strings.HasPrefix(p, "/") {
		return fmt.Errorf("%s %s=%q must end with '/' and not start with '/'", what, name, p)
	}
	for _, r := range p {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s %s=%q holds a control character", what, name, p)
		}
	}
	return nil
}

// applyPrefix makes Mountpoint serve only the volume's prefix (the attribute s3-controller's dynamic
// provisioning sets). A prefix mount option the user also gives is taken as relative to the volume's
// prefix, so it narrows the view inside the volume and can never reach another volume's keys.
func (v volumeContext) applyPrefix(args mountoptions.Args) error {
	if v.prefix == "" {
		return nil
	}
	user, ok := args["--prefix"]
	if ok {
		if err := checkPrefix("prefix", "mount option", user); err != nil {
			return fmt.Errorf("%w: with volume attribute %s=%q it is a prefix inside the volume's", err, attrPrefix, v.prefix)
		}
	}
	args["--prefix"] = v.prefix + user
	return nil
}

// mergeEnv layers environments, later ones winning, into sorted "K=V" (upstream's order: credentials over
// the node's defaults over the user's).
func mergeEnv(layers ...map[string]string) []string {
	all := map[string]string{}
	for _, l := range layers {
		for k, v := range l {
			all[k] = v
		}
	}
	out := make([]string, 0, len(all))
	for k, v := range all {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// userAgent is upstream's forced --user-agent-prefix.
func (d *Driver) userAgent(authSource string) string {
	parts := []string{"s3-csi-driver/" + d.opts.Version, "credential-source#" + authSource}
	if d.opts.KubernetesVersion != "" {
		parts = append(parts, "k8s/"+d.opts.KubernetesVersion)
	}
	install := d.opts.InstallationType
	if install == "" {
		install = "unknown"
	}
	return strings.Join(append(parts, "md/install#"+install), " ")
}
