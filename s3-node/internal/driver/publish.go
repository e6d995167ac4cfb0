package driver

import (
	"context"
	"errors"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/s3-node/internal/attachments"
	"github.com/stowage-csi/stowage/s3-node/internal/credentials"
	"github.com/stowage-csi/stowage/s3-node/internal/mounter"
	"github.com/stowage-csi/stowage/s3-node/internal/mountoptions"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// NodePublishVolume mounts the workload's volume in upstream's order: find the attachment and its Mountpoint
// Pod, write the credentials, mount the Pod's source unless it is mounted, bind the source at the target. A
// target that is mounted already only gets its credentials refreshed: the kubelet republishes every token
// period (requiresRepublish).
func (d *Driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	p, err := d.validatePublish(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	logger := klog.FromContext(ctx).WithValues("volumeID", p.volumeID, "pv", p.key.PVName, "workloadPod", p.workloadUID)
	ctx = klog.NewContext(ctx, logger)

	mounted, err := mounter.IsS3Mount(d.opts.Mounter.Sys(), p.target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "read the mount table: %v", err)
	}
	att, mpPodName, err := d.opts.Lookup.Find(ctx, p.key, p.workloadUID)
	if err != nil {
		return nil, status.Error(lookupCode(err), err.Error())
	}
	if mounted {
		if err := d.opts.Mounter.Refresh(ctx, mpPodName, d.credentials(p, att, mpPodName, nil, nil)); err != nil {
			return nil, status.Errorf(codes.Internal, "refresh the credentials of %s: %v", p.target, err)
		}
		logger.V(4).Info("Target already mounted: credentials refreshed", "target", p.target)
		return &csi.NodePublishVolumeResponse{}, nil
	}
	pod, err := d.opts.Lookup.RunningPod(ctx, mpPodName)
	if err != nil {
		return nil, status.Error(lookupCode(err), err.Error())
	}
	res, err := mountoptions.Rewrite(p.args, mountoptions.Request{
		ReadOnly: p.readOnly, FSGroup: p.key.FSGroup, UserAgentPrefix: d.userAgent(p.vc.authSource), CacheDir: s3api.CacheDir,
		Cache: mountoptions.Cache{Attribute: p.vc.cacheAttr, PodHasVolume: hasVolume(pod, s3api.CacheVolumeName),
			EmptyDirSizeLimit: p.vc.cacheSize, EmptyDirMedium: p.vc.cacheMedium},
	})
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	err = d.opts.Mounter.Publish(ctx, mounter.Request{
		Target: p.target, MPPodName: pod.Name, MPPodUID: string(pod.UID), Bucket: p.vc.bucket,
		Args: res.Args.List(), ReadOnly: res.ReadOnly, AllowOther: res.AllowOther,
		Credentials: d.credentials(p, att, pod.Name, pod, &res),
	})
	if err != nil {
		code := codes.Internal
		switch {
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			code = codes.DeadlineExceeded
		case errors.Is(err, mounter.ErrPodEnding):
			code = codes.Unavailable // the kubelet retries and finds the workload's new Pod
		}
		return nil, status.Errorf(code, "mount bucket %s at %s through Mountpoint Pod %s: %v", p.vc.bucket, p.target, pod.Name, err)
	}
	logger.Info("Volume published", "target", p.target, "mountpointPod", pod.Name, "readOnly", res.ReadOnly)
	return &csi.NodePublishVolumeResponse{}, nil
}

// credentials returns the function the mounter calls under the Pod's lock to write the credential files
// and build Mountpoint's environment. pod is nil on a refresh: the Pod's UID then comes from the lookup.
func (d *Driver) credentials(p *publish, att *s3api.MountpointS3PodAttachment, mpPodName string, pod *corev1.Pod, res *mountoptions.Result) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		if pod == nil {
			var err error
			if pod, err = d.opts.Lookup.RunningPod(ctx, mpPodName); err != nil {
				return nil, err
			}
		}
		region, err := d.stsRegion(ctx, p, att)
		if err != nil {
			return nil, err
		}
		credEnv, err := credentials.Write(credentials.Request{
			CommDir: d.opts.Mounter.Paths().CommDir(string(pod.UID)), MountpointPodUID: string(pod.UID), VolumeID: p.volumeID,
			AuthenticationSource: p.vc.authSource, Tokens: p.vc.tokens, RoleARN: att.Spec.WorkloadServiceAccountIAMRoleARN,
			STSRegion: region, PodIdentityAgentURI: d.opts.PodIdentityAgentURI,
		}, d.driverCredentials(p.vc.authSource))
		if err != nil {
			return nil, err
		}
		var optEnv map[string]string
		if res != nil {
			optEnv = res.Env
		}
		return mergeEnv(p.vc.userEnv, optEnv, d.opts.NodeEnv, credEnv), nil
	}
}

// stsRegion is the region of a workload's STS calls in upstream's order: the volume attribute stsRegion, the
// mount option region, the node plugin's AWS_REGION and AWS_DEFAULT_REGION, then the node's own region from
// IMDS. Only pod-level IRSA needs one, so only then is IMDS asked; "" otherwise.
func (d *Driver) stsRegion(ctx context.Context, p *publish, att *s3api.MountpointS3PodAttachment) (string, error) {
	for _, r := range []string{p.vc.stsRegion, p.args["--region"], d.opts.NodeEnv["AWS_REGION"], d.opts.NodeEnv["AWS_DEFAULT_REGION"]} {
		if r != "" {
			return r, nil
		}
	}
	if p.vc.authSource != s3api.AuthenticationSourcePod || att.Spec.WorkloadServiceAccountIAMRoleARN == "" {
		return "", nil
	}
	region, err := d.opts.InstanceRegion.Get(ctx)
	if err != nil {
		return "", fmt.Errorf("authenticationSource pod with IRSA needs an STS region: set the volume attribute stsRegion, the mount option region, or AWS_REGION on the node plugin (%w)", err)
	}
	klog.FromContext(ctx).V(4).Info("STS region from the node's instance metadata", "region", region)
	return region, nil
}

// driverCredentials are ignored with pod authentication: a workload never gets the driver's identity.
func (d *Driver) driverCredentials(authSource string) credentials.DriverEnv {
	if authSource == s3api.AuthenticationSourcePod {
		return credentials.DriverEnv{}
	}
	return d.opts.DriverCredentials
}

func hasVolume(pod *corev1.Pod, name string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Name == name {
			return true
		}
	}
	return false
}

// lookupCode marks waits for the controller as retriable, not as final failures.
func lookupCode(err error) codes.Code {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return codes.DeadlineExceeded
	}
	return codes.Unavailable
}

// publish is a validated NodePublishVolume request.
type publish struct {
	volumeID, target, workloadUID string
	readOnly                      bool
	vc                            volumeContext
	args                          mountoptions.Args
	key                           attachments.Key
}

func (d *Driver) validatePublish(req *csi.NodePublishVolumeRequest) (*publish, error) {
	p := &publish{volumeID: req.GetVolumeId(), target: req.GetTargetPath()}
	if p.volumeID == "" {
		return nil, errors.New("volume_id is required")
	}
	if p.target == "" {
		return nil, errors.New("target_path is required")
	}
	vcap := req.GetVolumeCapability()
	if vcap == nil {
		return nil, errors.New("volume_capability is required")
	}
	if vcap.GetBlock() != nil || vcap.GetMount() == nil {
		return nil, errors.New("volume_capability: only the mount access type is supported")
	}
	switch vcap.GetAccessMode().GetMode() {
	case csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:
		p.readOnly = true
	case csi.VolumeCapability_AccessMode_UNKNOWN:
		return nil, errors.New("volume_capability.access_mode is required")
	}
	p.readOnly = p.readOnly || req.GetReadonly()
	var err error
	if p.vc, err = parseVolumeContext(req.GetVolumeContext(), req.GetSecrets()); err != nil {
		return nil, err
	}
	if p.args, err = mountoptions.Parse(vcap.GetMount().GetMountFlags()); err != nil {
		return nil, err
	}
	if err := p.vc.applyPrefix(p.args); err != nil {
		return nil, err
	}
	podUID, pvName, err := mounter.ParseTarget(p.target)
	if err != nil {
		return nil, err
	}
	p.workloadUID = p.vc.podUID
	if p.workloadUID == "" {
		p.workloadUID = podUID
	}
	if p.vc.ephemeral {
		// The target names the Pod's volume, not a PV: the attachment carries the Pod's own name for it.
		pvName = s3api.InlineVolumeName(podUID, pvName)
	}
	p.key = attachments.Key{NodeName: d.opts.NodeID, PVName: pvName, VolumeID: p.volumeID,
		FSGroup: vcap.GetMount().GetVolumeMountGroup(), AuthenticationSource: p.vc.authSource}
	if p.vc.authSource == s3api.AuthenticationSourcePod {
		p.key.WorkloadNamespace, p.key.WorkloadServiceAccount = p.vc.podNamespace, p.vc.serviceAccount
	}
	return p, nil
}
