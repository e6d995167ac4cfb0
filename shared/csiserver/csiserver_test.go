package csiserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2/ktesting"
)

func TestParseEndpoint(t *testing.T) {
	for ep, want := range map[string]string{
		"unix:///csi/csi.sock": "unix /csi/csi.sock",
		"unix://tmp/csi.sock":  "unix /tmp/csi.sock", // upstream's default, relative to /
		"unix:/var/lib/kubelet/plugins/s3.csi.aws.com/csi.sock": "unix /var/lib/kubelet/plugins/s3.csi.aws.com/csi.sock", // upstream's chart
		"tcp://127.0.0.1:10000":                                 "tcp 127.0.0.1:10000",
	} {
		n, a, err := ParseEndpoint("--endpoint", ep)
		if err != nil || n+" "+a != want {
			t.Errorf("%s: %s %s %v, want %s", ep, n, a, err, want)
		}
	}
	for _, bad := range []string{"/csi/csi.sock", "unix://", "http://x", "::"} {
		if _, _, err := ParseEndpoint("--endpoint", bad); err == nil || !strings.Contains(err.Error(), "--endpoint") {
			t.Errorf("%s: %v, want an error naming the flag", bad, err)
		}
	}
}

// identity answers Probe only.
type identity struct {
	csi.UnimplementedIdentityServer
}

func (identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func TestServeReplacesAStaleSocketAndStopsWithItsContext(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "sub", "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	register := func(s *grpc.Server) error { csi.RegisterIdentityServer(s, identity{}); return nil }
	go func() { done <- Serve(ctx, "--endpoint", "unix://"+sock, register) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	probeCtx, probeCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer probeCancel()
	if _, err := csi.NewIdentityClient(conn).Probe(probeCtx, &csi.ProbeRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after cancel: %v", err)
	}
	// A file left at the socket's path, as by a killed process: a new Serve replaces it.
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- Serve(ctx2, "--endpoint", "unix://"+sock, register) }()
	conn2, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if _, err := csi.NewIdentityClient(conn2).Probe(probeCtx, &csi.ProbeRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	cancel2()
	if err := <-done; err != nil {
		t.Fatalf("second Serve after cancel: %v", err)
	}
}

func TestRequestsWithSecretsAreLoggedByTypeOnly(t *testing.T) {
	with := &csi.NodeStageVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"key": "hunter2"}}
	if got := fmt.Sprint(withoutSecrets(with)); strings.Contains(got, "hunter2") || !strings.Contains(got, "NodeStageVolumeRequest") {
		t.Errorf("a request with secrets is logged as %q, want its type without the secret", got)
	}
	without := &csi.NodeStageVolumeRequest{VolumeId: "vol-1"}
	if got := withoutSecrets(without); got != any(without) {
		t.Errorf("a request without secrets is logged as %v, want the request", got)
	}
	if got := fmt.Sprint(typeOf(without)); got != "*csi.NodeStageVolumeRequest" {
		t.Errorf("typeOf = %q", got)
	}
}

func TestFailedRequestsAreLoggedAtTheDefaultLevelWithoutTheRequest(t *testing.T) {
	secret := "hunter2"
	req := &csi.NodeStageVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"key": secret}}
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodeStageVolume"}
	tests := []struct {
		name      string
		err       error
		wantError bool // an error entry at the default verbosity
		wantCode  string
		wantMsg   string
	}{
		{name: "gRPC status", err: status.Error(codes.NotFound, "volume vol-1 not found"), wantError: true,
			wantCode: "NotFound", wantMsg: "volume vol-1 not found"},
		{name: "plain error", err: errors.New("disk on fire"), wantError: true, wantCode: "Unknown", wantMsg: "disk on fire"},
		{name: "success"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Verbosity 0, as the binaries run by default.
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(0), ktesting.BufferLogs(true)))
			handler := func(context.Context, any) (any, error) {
				if tc.err != nil {
					return nil, tc.err
				}
				return &csi.NodeStageVolumeResponse{}, nil
			}
			// LogRequestBodies: even the describer that logs request bodies must not put this one in a failure.
			if _, err := logInterceptor(logger, withoutSecrets)(context.Background(), req, info, handler); err != tc.err {
				t.Fatalf("interceptor returned %v, want the handler's %v", err, tc.err)
			}
			entries := logger.GetSink().(ktesting.Underlier).GetBuffer().Data()
			if !tc.wantError {
				if len(entries) != 0 {
					t.Fatalf("a successful request logged %v at the default verbosity, want nothing", entries)
				}
				return
			}
			if len(entries) != 1 || entries[0].Type != ktesting.LogError || entries[0].Message != "CSI request failed" {
				t.Fatalf("log = %v, want one error entry \"CSI request failed\"", entries)
			}
			kv := map[string]any{}
			for i := 0; i+1 < len(entries[0].WithKVList); i += 2 {
				kv[fmt.Sprint(entries[0].WithKVList[i])] = entries[0].WithKVList[i+1]
			}
			for i := 0; i+1 < len(entries[0].ParameterKVList); i += 2 {
				kv[fmt.Sprint(entries[0].ParameterKVList[i])] = entries[0].ParameterKVList[i+1]
			}
			want := map[string]any{"method": info.FullMethod, "code": tc.wantCode, "message": tc.wantMsg}
			for k, v := range want {
				if kv[k] != v {
					t.Errorf("%s = %v, want %v (entry %v)", k, kv[k], v, entries[0])
				}
			}
			if s := logger.GetSink().(ktesting.Underlier).GetBuffer().String(); strings.Contains(s, secret) {
				t.Errorf("the log holds the request's secret: %s", s)
			}
		})
	}
}
