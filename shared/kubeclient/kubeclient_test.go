package kubeclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	content := `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: ` + server + `
contexts:
- name: test
  context:
    cluster: test
    user: test
current-context: test
users:
- name: test
  user:
    token: secret-token
`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRESTConfig(t *testing.T) {
	path := writeKubeconfig(t, "https://127.0.0.1:6443")
	missing := filepath.Join(t.TempDir(), "nope")
	tests := []struct {
		name      string
		opts      Options
		wantHost  string
		wantToken string
		wantErr   string
	}{
		{name: "kubeconfig", opts: Options{Kubeconfig: path, QPS: 20, Burst: 100, UserAgent: "csi-attacher/dev"},
			wantHost: "https://127.0.0.1:6443", wantToken: "secret-token"},
		{name: "master alone", opts: Options{Master: "http://127.0.0.1:8080", QPS: 20, Burst: 100, UserAgent: "csi-attacher/dev"},
			wantHost: "http://127.0.0.1:8080"},
		{name: "master overrides the kubeconfig's server, keeps its credentials",
			opts:     Options{Kubeconfig: path, Master: "https://127.0.0.1:7443", QPS: 20, Burst: 100, UserAgent: "csi-attacher/dev"},
			wantHost: "https://127.0.0.1:7443", wantToken: "secret-token"},
		{name: "missing kubeconfig", opts: Options{Kubeconfig: missing}, wantErr: "--kubeconfig"},
		{name: "master with a missing kubeconfig", opts: Options{Kubeconfig: missing, Master: "https://127.0.0.1:7443"}, wantErr: "--master"},
		{name: "not in a cluster", opts: Options{}, wantErr: "set --kubeconfig"},
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := RESTConfig(tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("RESTConfig() = %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BearerToken != tt.wantToken {
				t.Errorf("token = %q, want %q", cfg.BearerToken, tt.wantToken)
			}
			if cfg.Host != tt.wantHost || cfg.QPS != 20 || cfg.Burst != 100 || cfg.UserAgent != "csi-attacher/dev" {
				t.Errorf("config host/qps/burst/agent = %s/%v/%d/%s", cfg.Host, cfg.QPS, cfg.Burst, cfg.UserAgent)
			}
		})
	}
}

func TestContentTypes(t *testing.T) {
	base, err := RESTConfig(Options{Kubeconfig: writeKubeconfig(t, "https://127.0.0.1:6443")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                string
		cfg                 func() string
		wantType, wantAccep string
	}{
		{"core", func() string { c := ForCore(base); return c.ContentType + "|" + c.AcceptContentTypes },
			"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"},
		{"crds", func() string { c := ForCRDs(base); return c.ContentType + "|" + c.AcceptContentTypes },
			"application/json", "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := tt.cfg(), tt.wantType+"|"+tt.wantAccep; got != want {
				t.Errorf("content/accept = %q, want %q", got, want)
			}
		})
	}
	if base.ContentType != "" {
		t.Errorf("ForCore/ForCRDs modified the base config: %q", base.ContentType)
	}
}

func TestClientsSendProtobufAndUserAgent(t *testing.T) {
	var mu sync.Mutex
	var got []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		http.Error(w, "test server", http.StatusInternalServerError)
	}))
	defer srv.Close()
	clients, err := New(context.Background(), Options{Kubeconfig: writeKubeconfig(t, srv.URL), QPS: 20, Burst: 100, UserAgent: "csi-provisioner/v1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []kubernetes.Interface{clients.Kube, clients.LeaderElection} {
		_, _ = c.CoreV1().ConfigMaps("default").Create(context.Background(),
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 {
		t.Fatal("no request reached the server")
	}
	for _, h := range got {
		if h.Get("Content-Type") != "application/vnd.kubernetes.protobuf" {
			t.Errorf("Content-Type = %q", h.Get("Content-Type"))
		}
		if !strings.HasPrefix(h.Get("Accept"), "application/vnd.kubernetes.protobuf") {
			t.Errorf("Accept = %q", h.Get("Accept"))
		}
		if h.Get("User-Agent") != "csi-provisioner/v1.2.3" {
			t.Errorf("User-Agent = %q", h.Get("User-Agent"))
		}
	}
	if clients.Kube == clients.LeaderElection {
		t.Error("leader election shares the main clientset")
	}
}
