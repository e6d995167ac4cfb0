package sidecar

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/stowage-csi/stowage/shared/kubeclient"
)

// eventServer is an API server that only accepts Events, and hands each one it decodes to the test.
func eventServer(t *testing.T) (kubeconfigPath string, received <-chan *corev1.Event) {
	t.Helper()
	got := make(chan *corev1.Event, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/events") {
			http.NotFound(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		ev, ok := obj.(*corev1.Event)
		if err != nil || !ok {
			http.Error(w, fmt.Sprintf("not an Event: %v", err), http.StatusBadRequest)
			return
		}
		select {
		case got <- ev:
		default:
		}
		// The Event as sent is a valid answer to its create.
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	content := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + srv.URL + "\n" +
		"contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, got
}

// env.Events records with the source the sidecar chose (the binary name by default) through the client it chose.
// newRecorder is called directly rather than through Run: Run sets up klog's global logger. The Event written
// here must be over (Shutdown waits for it) before a later test's Run resets that logger.
func TestNewRecorderUsesTheChosenSource(t *testing.T) {
	tests := []struct {
		name       string
		source     func(driver string) string
		ownClient  bool
		wantSource string
	}{
		{name: "binary name by default", wantSource: "csi-test"},
		{name: "sidecar's own source, own client", source: func(d string) string { return d + "_node-1" }, ownClient: true,
			wantSource: "hostpath.csi.k8s.io_node-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, received := eventServer(t)
			clients, err := kubeclient.New(context.Background(), kubeclient.Options{Kubeconfig: path, QPS: 20, Burst: 100, UserAgent: "csi-test/dev"})
			if err != nil {
				t.Fatal(err)
			}
			o := options()
			o.EventSource, o.EventsOwnClient = tt.source, tt.ownClient
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rec, err := newRecorder(ctx, o, &Env{Binary: o.Binary, Clients: clients, DriverName: "hostpath.csi.k8s.io"})
			if err != nil {
				t.Fatal(err)
			}
			defer rec.Shutdown() // waits for the write in flight, which reads klog's global logger
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u-1"}}
			rec.Event(pod, corev1.EventTypeNormal, "Tested", "hello")
			select {
			case ev := <-received:
				if ev.Source.Component != tt.wantSource || ev.Reason != "Tested" || ev.InvolvedObject.Name != "p" {
					t.Errorf("Event from %q reason %q on %q, want from %q reason Tested on p",
						ev.Source.Component, ev.Reason, ev.InvolvedObject.Name, tt.wantSource)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no Event reached the API server")
			}
		})
	}
}

// With EventsOwnClient, Events wait for a rate limiter of their own, set to the main client's limits.
func TestEventClientHasItsOwnRateLimiter(t *testing.T) {
	clients, err := kubeclient.New(context.Background(), kubeclient.Options{Kubeconfig: kubeconfig(t), QPS: 7, Burst: 9, UserAgent: "csi-test/dev"})
	if err != nil {
		t.Fatal(err)
	}
	limiter := func(c kubernetes.Interface) flowcontrol.RateLimiter { return c.CoreV1().RESTClient().GetRateLimiter() }
	shared, err := eventClient(options(), clients)
	if err != nil {
		t.Fatal(err)
	}
	if shared != clients.Kube {
		t.Error("without EventsOwnClient, Events do not use the main client")
	}
	o := options()
	o.EventsOwnClient = true
	own, err := eventClient(o, clients)
	if err != nil {
		t.Fatal(err)
	}
	mine, main := limiter(own), limiter(clients.Kube)
	if mine == main {
		t.Error("the Event client shares the main client's rate limiter")
	}
	if mine.QPS() != 7 || main.QPS() != 7 {
		t.Errorf("QPS %v (Events) and %v (main), want 7 for both", mine.QPS(), main.QPS())
	}
}
