package modifyrpc

import (
	"context"
	"errors"
	"maps"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
)

// modifyRequestBytes encodes a ModifyVolumePropertiesRequest by hand from modify.proto's field numbers (name
// 1, parameters 2, context 3; map entries key 1, value 2), independently of the descriptors under test.
func modifyRequestBytes(name string, params, vctx map[string]string) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, name)
	for field, m := range map[protowire.Number]map[string]string{2: params, 3: vctx} {
		for k, v := range m {
			var e []byte
			e = protowire.AppendTag(e, 1, protowire.BytesType)
			e = protowire.AppendString(e, k)
			e = protowire.AppendTag(e, 2, protowire.BytesType)
			e = protowire.AppendString(e, v)
			b = protowire.AppendTag(b, field, protowire.BytesType)
			b = protowire.AppendBytes(b, e)
		}
	}
	return b
}

func TestModifyRequestWireFormat(t *testing.T) {
	m, err := Describe()
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]string{"type": "io2", "iops": "4000", "tagSpecification_1": "team=storage"}
	vctx := map[string]string{"csi.storage.k8s.io/pvc/name": "data"}
	msg := dynamicpb.NewMessage(m.ModifyRequest)
	if err := proto.Unmarshal(modifyRequestBytes("vol-0123", params, vctx), msg); err != nil {
		t.Fatal(err)
	}
	name, gotParams, gotCtx := m.ReadModifyRequest(msg)
	if name != "vol-0123" || !maps.Equal(gotParams, params) || !maps.Equal(gotCtx, vctx) {
		t.Fatalf("decoded %q %v %v", name, gotParams, gotCtx)
	}
	// And what NewModifyRequest encodes decodes to the same.
	wire, err := proto.Marshal(m.NewModifyRequest("vol-0123", params, vctx))
	if err != nil {
		t.Fatal(err)
	}
	again := dynamicpb.NewMessage(m.ModifyRequest)
	if err := proto.Unmarshal(wire, again); err != nil {
		t.Fatal(err)
	}
	if name, p, c := m.ReadModifyRequest(again); name != "vol-0123" || !maps.Equal(p, params) || !maps.Equal(c, vctx) {
		t.Fatalf("round trip %q %v %v", name, p, c)
	}
	if got := m.ModifyRequest.FullName(); got != "modify.v1.ModifyVolumePropertiesRequest" {
		t.Fatalf("message name %s", got)
	}
}

type fakeServer struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (f *fakeServer) ModifyVolumeProperties(_ context.Context, name string, params, _ map[string]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name+" type="+params["type"])
	return f.err
}

// TestServiceOverGRPC calls both methods by their full names over a unix socket, as the sidecar does.
func TestServiceOverGRPC(t *testing.T) {
	fs := &fakeServer{}
	srv := grpc.NewServer()
	if err := Register(srv, fs); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "csi.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Stop()
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Error(err)
		}
	}()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m, _ := Describe()
	ctx := context.Background()
	if err := conn.Invoke(ctx, MethodGetCapability, dynamicpb.NewMessage(m.CapabilityRequest), dynamicpb.NewMessage(m.CapabilityResponse)); err != nil {
		t.Fatalf("GetCSIDriverModificationCapability: %v", err)
	}
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{code: codes.OK},
		{err: status.Error(codes.InvalidArgument, "iops: not a number"), code: codes.InvalidArgument},
	} {
		fs.err = tc.err
		err := conn.Invoke(ctx, MethodModifyProperties, m.NewModifyRequest("vol-1", map[string]string{"type": "io2"}, nil), dynamicpb.NewMessage(m.ModifyResponse))
		if status.Code(err) != tc.code {
			t.Fatalf("ModifyVolumeProperties: %v, want %v", err, tc.code)
		}
	}
	if len(fs.calls) != 2 || fs.calls[0] != "vol-1 type=io2" {
		t.Fatalf("calls %v", fs.calls)
	}
}
