package credentials

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestWrite(t *testing.T) {
	src := t.TempDir()
	irsaTok := filepath.Join(src, "irsa")
	piTok := filepath.Join(src, "pi")
	_ = os.WriteFile(irsaTok, []byte("driver-irsa"), 0o600)
	_ = os.WriteFile(piTok, []byte("driver-pi"), 0o600)
	const id = "mpuid-vol~1" // volume ID "vol/1" escaped
	const pod = "/comm/credentials/"
	tokens := `{"sts.amazonaws.com":{"token":"sts-tok","expirationTimestamp":"x"},"pods.eks.amazonaws.com":{"token":"pi-tok"}}`
	tests := []struct {
		name      string
		req       Request
		driver    DriverEnv
		wantEnv   map[string]string
		wantFiles map[string]string
		wantErr   string
	}{
		{name: "driver, none: Mountpoint's default chain", req: Request{}, wantEnv: map[string]string{}, wantFiles: map[string]string{}},
		{name: "driver, long-term keys as a profile", driver: DriverEnv{AccessKeyID: "AKID", SecretAccessKey: "SECRET", SessionToken: "ST"},
			wantEnv: map[string]string{"AWS_PROFILE": id + "-s3-csi", "AWS_CONFIG_FILE": pod + id + "-s3-csi-config", "AWS_SHARED_CREDENTIALS_FILE": pod + id + "-s3-csi-credentials"},
			wantFiles: map[string]string{id + "-s3-csi-config": "[profile " + id + "-s3-csi]\n",
				id + "-s3-csi-credentials": "[" + id + "-s3-csi]\naws_access_key_id=AKID\naws_secret_access_key=SECRET\naws_session_token=ST\n"}},
		{name: "driver, IRSA token copied", driver: DriverEnv{RoleARN: "arn:role", WebIdentityTokenFile: irsaTok},
			wantEnv:   map[string]string{"AWS_ROLE_ARN": "arn:role", "AWS_WEB_IDENTITY_TOKEN_FILE": pod + "token"},
			wantFiles: map[string]string{"token": "driver-irsa"}},
		{name: "driver, Pod Identity token copied", driver: DriverEnv{ContainerCredentialsFullURI: "http://agent", ContainerAuthorizationTokenFile: piTok},
			wantEnv:   map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://agent", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": pod + "eks-pod-identity-token"},
			wantFiles: map[string]string{"eks-pod-identity-token": "driver-pi"}},
		{name: "driver, unreadable token", driver: DriverEnv{RoleARN: "arn", WebIdentityTokenFile: filepath.Join(src, "missing")}, wantErr: "read the driver's token"},
		{name: "pod, IRSA", req: Request{AuthenticationSource: "pod", Tokens: tokens, RoleARN: "arn:wl", STSRegion: "eu-west-1"},
			driver: DriverEnv{AccessKeyID: "ignored", SecretAccessKey: "ignored"},
			wantEnv: map[string]string{"AWS_ROLE_ARN": "arn:wl", "AWS_WEB_IDENTITY_TOKEN_FILE": pod + id + ".token", "AWS_REGION": "eu-west-1",
				"AWS_DEFAULT_REGION": "eu-west-1", "AWS_EC2_METADATA_DISABLED": "true"},
			wantFiles: map[string]string{id + ".token": "sts-tok"}},
		{name: "pod, Pod Identity", req: Request{AuthenticationSource: "pod", Tokens: tokens, PodIdentityAgentURI: "http://169.254.170.23/v1/credentials"},
			wantEnv: map[string]string{"AWS_CONTAINER_CREDENTIALS_FULL_URI": "http://169.254.170.23/v1/credentials",
				"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": pod + id + "-eks-pod-identity.token", "AWS_EC2_METADATA_DISABLED": "true"},
			wantFiles: map[string]string{id + "-eks-pod-identity.token": "pi-tok"}},
		{name: "pod, no tokens", req: Request{AuthenticationSource: "pod"}, wantErr: "tokenRequests"},
		{name: "pod, bad tokens", req: Request{AuthenticationSource: "pod", Tokens: "{"}, wantErr: "not valid JSON"},
		{name: "pod, audience missing", req: Request{AuthenticationSource: "pod", Tokens: `{}`, RoleARN: "arn"}, wantErr: "audience sts.amazonaws.com"},
		{name: "pod, IRSA without region", req: Request{AuthenticationSource: "pod", Tokens: tokens, RoleARN: "arn"}, wantErr: "stsRegion"},
		{name: "unknown source", req: Request{AuthenticationSource: "node"}, wantErr: `authenticationSource "node"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			comm := t.TempDir()
			tt.req.CommDir, tt.req.MountpointPodUID, tt.req.VolumeID = comm, "mpuid", "vol/1"
			env, err := Write(tt.req, tt.driver)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(env, tt.wantEnv) {
				t.Errorf("env = %v\nwant %v", env, tt.wantEnv)
			}
			dir := filepath.Join(comm, "credentials")
			st, err := os.Stat(dir)
			if err != nil || st.Mode().Perm() != DirMode {
				t.Fatalf("credentials dir: %v, %v", st, err)
			}
			entries, _ := os.ReadDir(dir)
			got := map[string]string{}
			for _, e := range entries {
				b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
				got[e.Name()] = string(b)
				if info, _ := e.Info(); info.Mode().Perm() != FileMode {
					t.Errorf("%s has mode %v, want %v", e.Name(), info.Mode().Perm(), FileMode)
				}
			}
			if !reflect.DeepEqual(got, tt.wantFiles) {
				t.Errorf("files = %v\nwant %v", got, tt.wantFiles)
			}
			if err := Remove(comm); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("credentials dir left after Remove: %v", err)
			}
		})
	}
}

// A refresh replaces the token in place (kubelet republishes every token period).
func TestWriteRefreshes(t *testing.T) {
	comm := t.TempDir()
	r := Request{CommDir: comm, MountpointPodUID: "u", VolumeID: "v", AuthenticationSource: "pod", PodIdentityAgentURI: "http://a"}
	for _, tok := range []string{"first", "second"} {
		r.Tokens = `{"pods.eks.amazonaws.com":{"token":"` + tok + `"}}`
		if _, err := Write(r, DriverEnv{}); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(comm, "credentials", "u-v-eks-pod-identity.token"))
		if string(b) != tok {
			t.Fatalf("token = %q, want %q", b, tok)
		}
	}
}

// Files take the comm directory's group (the Pod's fsGroup) through its setgid bit.
func TestWriteKeepsTheFSGroup(t *testing.T) {
	comm := t.TempDir()
	if err := os.Chown(comm, 0, 1000); err != nil {
		t.Skipf("cannot chown (not root): %v", err)
	}
	if err := os.Chmod(comm, os.ModeSetgid|0o770); err != nil {
		t.Fatal(err)
	}
	r := Request{CommDir: comm, MountpointPodUID: "u", VolumeID: "v"}
	if _, err := Write(r, DriverEnv{AccessKeyID: "a", SecretAccessKey: "s"}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(comm, "credentials")
	for _, p := range []string{dir, filepath.Join(dir, "u-v-s3-csi-credentials")} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if gid := st.Sys().(*syscall.Stat_t).Gid; gid != 1000 {
			t.Errorf("%s has gid %d, want the fsGroup 1000", p, gid)
		}
	}
}
