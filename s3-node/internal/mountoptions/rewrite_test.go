package mountoptions

import (
	"reflect"
	"strings"
	"testing"
)

func TestRewrite(t *testing.T) {
	const ua = "s3-csi-driver/x credential-source#driver k8s/v1 md/install#unknown"
	tests := []struct {
		name    string
		in      []string
		req     Request
		want    []string
		wantEnv map[string]string
		wantRO  bool
		wantErr string
	}{
		{name: "defaults: allow-root and the forced user agent", in: nil, req: Request{UserAgentPrefix: ua},
			want: []string{"--allow-root", "--user-agent-prefix=" + ua}},
		{name: "user agent overwritten", in: []string{"user-agent-prefix mine"}, req: Request{UserAgentPrefix: ua},
			want: []string{"--allow-root", "--user-agent-prefix=" + ua}},
		{name: "read-only option becomes the kernel flag", in: []string{"read-only"}, want: []string{"--allow-root"}, wantRO: true},
		{name: "read-only request", req: Request{ReadOnly: true}, want: []string{"--allow-root"}, wantRO: true},
		{name: "fsGroup fills ownership", req: Request{FSGroup: "3000"},
			want: []string{"--allow-other", "--dir-mode=770", "--file-mode=660", "--gid=3000"}},
		{name: "fsGroup keeps the user's choices", in: []string{"gid 5", "dir-mode 700"}, req: Request{FSGroup: "3000"},
			want: []string{"--allow-other", "--dir-mode=700", "--file-mode=660", "--gid=5"}},
		{name: "bad fsGroup", req: Request{FSGroup: "x"}, wantErr: `volume_mount_group "x"`},
		{name: "aws-max-attempts becomes env", in: []string{"aws-max-attempts 7"}, want: []string{"--allow-root"}, wantEnv: map[string]string{"AWS_MAX_ATTEMPTS": "7"}},
		{name: "aws-max-attempts must be a number", in: []string{"aws-max-attempts x"}, wantErr: "positive integer"},
		{name: "cache forced to the cache volume", in: []string{"cache /tmp/c"}, req: Request{CacheDir: "/local-cache", Cache: Cache{PodHasVolume: true}},
			want: []string{"--allow-root", "--cache=/local-cache"}},
		{name: "cache option and attribute", in: []string{"cache /tmp/c"}, req: Request{Cache: Cache{Attribute: "emptyDir"}}, wantErr: "exclusive"},
		{name: "emptyDir on disk: max-cache-size injected at 95%", req: Request{CacheDir: "/local-cache", Cache: Cache{Attribute: "emptyDir", PodHasVolume: true, EmptyDirSizeLimit: "1Gi"}},
			want: []string{"--allow-root", "--cache=/local-cache", "--max-cache-size=972"}},
		{name: "emptyDir on disk: clamped", in: []string{"max-cache-size 1000"}, req: Request{CacheDir: "/c", Cache: Cache{Attribute: "emptyDir", PodHasVolume: true, EmptyDirSizeLimit: "1Gi"}},
			want: []string{"--allow-root", "--cache=/c", "--max-cache-size=972"}},
		{name: "emptyDir in memory: kept", in: []string{"max-cache-size 1000"}, req: Request{CacheDir: "/c", Cache: Cache{Attribute: "emptyDir", PodHasVolume: true, EmptyDirSizeLimit: "1Gi", EmptyDirMedium: "Memory"}},
			want: []string{"--allow-root", "--cache=/c", "--max-cache-size=1000"}},
		{name: "max-cache-size over the limit", in: []string{"max-cache-size 2000"}, req: Request{Cache: Cache{Attribute: "emptyDir", EmptyDirSizeLimit: "1Gi"}}, wantErr: "exceeds"},
		{name: "bad size limit", req: Request{Cache: Cache{Attribute: "emptyDir", EmptyDirSizeLimit: "lots"}}, wantErr: "cacheEmptyDirSizeLimit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := Parse(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Rewrite(args, tt.req)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.Args.List(), tt.want) {
				t.Errorf("args = %q, want %q", res.Args.List(), tt.want)
			}
			if tt.wantEnv == nil {
				tt.wantEnv = map[string]string{}
			}
			if !reflect.DeepEqual(res.Env, tt.wantEnv) {
				t.Errorf("env = %v, want %v", res.Env, tt.wantEnv)
			}
			if res.ReadOnly != tt.wantRO || !res.AllowOther {
				t.Errorf("readOnly = %v (want %v), allowOther = %v", res.ReadOnly, tt.wantRO, res.AllowOther)
			}
		})
	}
}
