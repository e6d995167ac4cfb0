package s3api

import "k8s.io/apimachinery/pkg/runtime"

// DeepCopyInto copies a into out.
func (a *MountpointS3PodAttachment) DeepCopyInto(out *MountpointS3PodAttachment) {
	*out = *a
	out.TypeMeta = a.TypeMeta
	a.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	a.Spec.DeepCopyInto(&out.Spec)
}

// DeepCopy returns a copy of a.
func (a *MountpointS3PodAttachment) DeepCopy() *MountpointS3PodAttachment {
	if a == nil {
		return nil
	}
	out := new(MountpointS3PodAttachment)
	a.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (a *MountpointS3PodAttachment) DeepCopyObject() runtime.Object { return a.DeepCopy() }

// DeepCopyInto copies s into out.
func (s *MountpointS3PodAttachmentSpec) DeepCopyInto(out *MountpointS3PodAttachmentSpec) {
	*out = *s
	if s.MountpointS3PodAttachments == nil {
		return
	}
	out.MountpointS3PodAttachments = make(map[string][]WorkloadPodAttachment, len(s.MountpointS3PodAttachments))
	for k, v := range s.MountpointS3PodAttachments {
		if v == nil {
			out.MountpointS3PodAttachments[k] = nil
			continue
		}
		ws := make([]WorkloadPodAttachment, len(v))
		for i := range v {
			v[i].AttachmentTime.DeepCopyInto(&ws[i].AttachmentTime)
			ws[i].WorkloadPodUID = v[i].WorkloadPodUID
		}
		out.MountpointS3PodAttachments[k] = ws
	}
}

// DeepCopyInto copies l into out.
func (l *MountpointS3PodAttachmentList) DeepCopyInto(out *MountpointS3PodAttachmentList) {
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]MountpointS3PodAttachment, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l.
func (l *MountpointS3PodAttachmentList) DeepCopy() *MountpointS3PodAttachmentList {
	if l == nil {
		return nil
	}
	out := new(MountpointS3PodAttachmentList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *MountpointS3PodAttachmentList) DeepCopyObject() runtime.Object { return l.DeepCopy() }
