package driver

import (
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/s3-node/internal/mountoptions"
	"github.com/stowage-csi/stowage/shared/s3api"
	"github.com/stowage-csi/stowage/shared/testutil"
)

// volumeContextKeys are the attributes an error may name: every refusal must say which one is wrong.
var volumeContextKeys = []string{attrBucketName, attrAuthSource, attrCache, attrCacheMedium, attrPrefix, attrMountpointEnv}

// FuzzParseVolumeContext checks that no volume context panics the node, that a refusal names the attribute,
// and that what is accepted keeps the node's promises: a bucket, a known authentication source, pod
// credentials for inline volumes, only the allowed Mountpoint variables, and a prefix Mountpoint takes that a
// user's prefix mount option can only narrow.
func FuzzParseVolumeContext(f *testing.F) {
	f.Add("bucketName=b", "", "")
	f.Add("bucketName=b\nauthenticationSource=pod\ncsi.storage.k8s.io/ephemeral=true\ncsi.storage.k8s.io/pod.uid=u", "csi.storage.k8s.io/serviceAccount.tokens={}", "logs/")
	f.Add("bucketName=b\nprefix=team/pvc-1/\ncache=emptyDir\ncacheEmptyDirMedium=Memory\ncacheEmptyDirSizeLimit=1Gi", "", "logs/")
	f.Add("bucketName=b\nmountpointEnv.HTTPS_PROXY=http://p:3128\nmountpointEnv.NO_PROXY=10.0.0.0/8", "", "")
	f.Add("bucketName=b\nmountpointEnv.AWS_ACCESS_KEY_ID=x", "", "")
	f.Add("bucketName=b\nprefix=/abs/", "", "")
	f.Add("bucketName=b\nprefix=a\tb/", "", "/x/")
	f.Add("bucketName=b\ncsi.storage.k8s.io/ephemeral=true", "", "")
	f.Fuzz(func(t *testing.T, vcText, secretsText, userPrefix string) {
		vc, secrets := testutil.FuzzMap(vcText), testutil.FuzzMap(secretsText)
		v, err := parseVolumeContext(vc, secrets)
		if err != nil {
			named := false
			for _, k := range volumeContextKeys {
				named = named || strings.Contains(err.Error(), k)
			}
			if !named {
				t.Fatalf("parseVolumeContext(%q) = %v: the error names no attribute", vc, err)
			}
			return
		}
		if v.bucket == "" || v.bucket != vc[attrBucketName] {
			t.Fatalf("accepted bucket %q from %q", v.bucket, vc)
		}
		if v.authSource != s3api.AuthenticationSourceDriver && v.authSource != s3api.AuthenticationSourcePod {
			t.Fatalf("accepted authentication source %q", v.authSource)
		}
		if v.ephemeral && v.authSource != s3api.AuthenticationSourcePod {
			t.Fatalf("an inline volume mounts with the driver's credentials: %q", vc)
		}
		if tok := secrets[ctxServiceAccountTok]; tok != "" && v.tokens != tok {
			t.Fatalf("tokens in the secrets were not preferred: got %q", v.tokens)
		}
		for k := range vc {
			if name, ok := strings.CutPrefix(k, attrMountpointEnv); ok && !allowedEnv[name] {
				t.Fatalf("accepted %s", k)
			}
		}
		for k := range v.userEnv {
			if !allowedEnv[k] {
				t.Fatalf("user environment holds %s", k)
			}
		}
		args := mountoptions.Args{}
		if userPrefix != "" {
			args["--prefix"] = userPrefix
		}
		if err := v.applyPrefix(args); err != nil {
			if !strings.Contains(err.Error(), "prefix") {
				t.Fatalf("applyPrefix(%q) on %q = %v: the error names no prefix", userPrefix, v.prefix, err)
			}
			return
		}
		got, set := args["--prefix"]
		switch {
		case v.prefix == "":
			if got != userPrefix || set != (userPrefix != "") {
				t.Fatalf("a volume without a prefix attribute changed the prefix option %q to %q", userPrefix, got)
			}
		case !strings.HasPrefix(got, v.prefix) || !strings.HasSuffix(got, "/") || checkPrefix("prefix", "mount option", got) != nil:
			t.Fatalf("volume prefix %q with option %q gave %q, which leaves the volume or Mountpoint refuses", v.prefix, userPrefix, got)
		}
	})
}
