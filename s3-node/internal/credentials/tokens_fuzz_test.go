package credentials

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// FuzzPodTokens reads the kubelet's service account tokens (the volume context's
// csi.storage.k8s.io/serviceAccount.tokens) for a pod-credentials mount, and the file name its volume ID
// makes: no input panics; a token is found exactly when the JSON holds one for the audience the mount uses;
// no error carries a token, since errors reach Events and logs; and the file a volume ID names stays in the
// credentials directory. The node here lacks what a pod mount needs after the token (an STS region, the Pod
// Identity agent), so the test writes no file and 20,000 runs stay fast.
func FuzzPodTokens(f *testing.F) {
	f.Add(`{"sts.amazonaws.com":{"token":"sts-tok","expirationTimestamp":"x"},"pods.eks.amazonaws.com":{"token":"pi-tok"}}`, "arn:aws:iam::1:role/r", "vol/1")
	f.Add(`{"pods.eks.amazonaws.com":{"token":"pi-tok"}}`, "", "..")
	f.Add(`{"sts.amazonaws.com":{"token":""}}`, "arn", "v")
	f.Add(`{"sts.amazonaws.com":"secret-token"}`, "arn", "v")
	f.Add(`{"sts.amazonaws.com":{"token":"secret-token"`, "arn", "v")
	f.Add(`[]`, "", "v")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, tokens, roleARN, volumeID string) {
		r := Request{CommDir: dir, MountpointPodUID: "0f1e", VolumeID: volumeID, AuthenticationSource: s3api.AuthenticationSourcePod,
			Tokens: tokens, RoleARN: roleARN}
		audience := AudiencePodIdentity
		if roleARN != "" {
			audience = AudienceSTS
		}
		var toks serviceAccountTokens
		found := json.Unmarshal([]byte(tokens), &toks) == nil && toks[audience].Token != ""
		_, err := Write(r, DriverEnv{})
		if err == nil {
			t.Fatalf("Write(%+v) succeeded without an STS region or a Pod Identity agent", r)
		}
		if got := !strings.Contains(err.Error(), "serviceAccount.tokens"); got != found {
			t.Fatalf("tokens %q (audience %s): %v", tokens, audience, err)
		}
		for _, tok := range toks {
			if len(tok.Token) >= 4 && strings.Contains(err.Error(), tok.Token) {
				t.Fatalf("the error %q carries a token", err)
			}
		}
		name := r.ID() + ".token"
		if filepath.Base(name) != name || filepath.Dir(filepath.Join(dir, name)) != dir {
			t.Fatalf("volume ID %q names the file %q outside the credentials directory", volumeID, name)
		}
		if entries, err := os.ReadDir(filepath.Join(dir, "credentials")); err != nil || len(entries) != 0 {
			t.Fatalf("files written: %v, %v", entries, err)
		}
	})
}
