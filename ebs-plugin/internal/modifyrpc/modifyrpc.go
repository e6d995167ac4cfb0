// Package modifyrpc serves the gRPC service volume-modifier-for-k8s (upstream's sidecar that modifies EBS
// volumes from PVC annotations) calls on the driver's socket: modify.v1.Modify with
// GetCSIDriverModificationCapability and ModifyVolumeProperties, as its modify.proto declares. The proto's
// Go module is not available to Stowage, so the messages are described here, field for field, and carried
// as dynamic protobuf messages: the wire format is the proto's.
package modifyrpc

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// ServiceName and the full method names, as upstream's sidecar calls them.
const (
	ServiceName            = "modify.v1.Modify"
	MethodGetCapability    = "/" + ServiceName + "/GetCSIDriverModificationCapability"
	MethodModifyProperties = "/" + ServiceName + "/ModifyVolumeProperties"
)

// Server handles the service's calls.
type Server interface {
	// ModifyVolumeProperties modifies the volume name (the PV's volume handle) to the attributes in
	// parameters (the PVC's annotations with the driver's prefix removed); context is the sidecar's extra
	// information.
	ModifyVolumeProperties(ctx context.Context, name string, parameters, context map[string]string) error
}

// Messages are the service's message descriptors.
type Messages struct {
	CapabilityRequest, CapabilityResponse protoreflect.MessageDescriptor
	ModifyRequest, ModifyResponse         protoreflect.MessageDescriptor
}

// Describe builds the descriptors of modify.proto (package modify.v1).
func Describe() (*Messages, error) {
	str := descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	msg := descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
	optional := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	repeated := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	field := func(name string, number int32, label *descriptorpb.FieldDescriptorProto_Label, typ *descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(number), Label: label, Type: typ,
			JsonName: proto.String(name)}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	mapEntry := func(name string) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
			Field: []*descriptorpb.FieldDescriptorProto{field("key", 1, optional, str, ""), field("value", 2, optional, str, "")}}
	}
	empty := func(name string) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name)}
	}
	const req = ".modify.v1.ModifyVolumePropertiesRequest."
	file := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("modify.proto"),
		Package: proto.String("modify.v1"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			empty("GetCSIDriverModificationCapabilityRequest"),
			empty("GetCSIDriverModificationCapabilityResponse"),
			{
				Name: proto.String("ModifyVolumePropertiesRequest"),
				Field: []*descriptorpb.FieldDescriptorProto{
					field("name", 1, optional, str, ""),
					field("parameters", 2, repeated, msg, req+"ParametersEntry"),
					field("context", 3, repeated, msg, req+"ContextEntry"),
				},
				NestedType: []*descriptorpb.DescriptorProto{mapEntry("ParametersEntry"), mapEntry("ContextEntry")},
			},
			empty("ModifyVolumePropertiesResponse"),
		},
	}
	fd, err := protodesc.NewFile(file, nil)
	if err != nil {
		return nil, fmt.Errorf("describe modify.proto: %w", err)
	}
	m := fd.Messages()
	return &Messages{
		CapabilityRequest: m.ByName("GetCSIDriverModificationCapabilityRequest"), CapabilityResponse: m.ByName("GetCSIDriverModificationCapabilityResponse"),
		ModifyRequest: m.ByName("ModifyVolumePropertiesRequest"), ModifyResponse: m.ByName("ModifyVolumePropertiesResponse"),
	}, nil
}

// Register adds the service to s, served by srv.
func Register(s grpc.ServiceRegistrar, srv Server) error {
	msgs, err := Describe()
	if err != nil {
		return err
	}
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: ServiceName,
		HandlerType: (*Server)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "GetCSIDriverModificationCapability", Handler: msgs.capabilityHandler},
			{MethodName: "ModifyVolumeProperties", Handler: msgs.modifyHandler},
		},
		Metadata: "modify.proto",
	}, srv)
	return nil
}

func (m *Messages) capabilityHandler(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := dynamicpb.NewMessage(m.CapabilityRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	handle := func(context.Context, any) (any, error) { return dynamicpb.NewMessage(m.CapabilityResponse), nil }
	if interceptor == nil {
		return handle(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{FullMethod: MethodGetCapability}, handle)
}

func (m *Messages) modifyHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := dynamicpb.NewMessage(m.ModifyRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	handle := func(ctx context.Context, req any) (any, error) {
		name, params, vctx := m.ReadModifyRequest(req.(proto.Message))
		if err := srv.(Server).ModifyVolumeProperties(ctx, name, params, vctx); err != nil {
			return nil, err
		}
		return dynamicpb.NewMessage(m.ModifyResponse), nil
	}
	if interceptor == nil {
		return handle(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{FullMethod: MethodModifyProperties}, handle)
}

// ReadModifyRequest returns the fields of a ModifyVolumePropertiesRequest.
func (m *Messages) ReadModifyRequest(msg proto.Message) (name string, parameters, context map[string]string) {
	r := msg.ProtoReflect()
	fields := m.ModifyRequest.Fields()
	name = r.Get(fields.ByName("name")).String()
	readMap := func(field string) map[string]string {
		out := map[string]string{}
		r.Get(fields.ByName(protoreflect.Name(field))).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
			out[k.String()] = v.String()
			return true
		})
		return out
	}
	return name, readMap("parameters"), readMap("context")
}

// NewModifyRequest builds a ModifyVolumePropertiesRequest (for clients and tests).
func (m *Messages) NewModifyRequest(name string, parameters, context map[string]string) proto.Message {
	msg := dynamicpb.NewMessage(m.ModifyRequest)
	fields := m.ModifyRequest.Fields()
	msg.Set(fields.ByName("name"), protoreflect.ValueOfString(name))
	for field, values := range map[protoreflect.Name]map[string]string{"parameters": parameters, "context": context} {
		mp := msg.Mutable(fields.ByName(field)).Map()
		for k, v := range values {
			mp.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString(v))
		}
	}
	return msg
}
