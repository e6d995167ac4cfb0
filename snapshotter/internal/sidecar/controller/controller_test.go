package controller

import (
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/stowage-csi/stowage/snapshotter/internal/sidecar/sidecartest"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

func TestShouldEnqueue(t *testing.T) {
	msg := "Failed to create snapshot: boom"
	withError := func(c *snapv1.VolumeSnapshotContent) {
		c.Status = &snapv1.VolumeSnapshotContentStatus{ReadyToUse: new(bool), Error: &snapv1.VolumeSnapshotError{Message: &msg}}
	}
	handle := "snap-1"
	tests := []struct {
		name   string
		change func(c *snapv1.VolumeSnapshotContent)
		rv     string
		want   bool
	}{
		{name: "resync with the same resourceVersion", rv: "1", want: true},
		{name: "only our error write", change: withError, rv: "2", want: false},
		{name: "annotation added by the snapshot controller", rv: "2", want: true, change: func(c *snapv1.VolumeSnapshotContent) {
			c.Annotations = map[string]string{snapapi.AnnBeingDeleted: "yes"}
		}},
		{name: "status gets a handle", rv: "2", want: true, change: func(c *snapv1.VolumeSnapshotContent) {
			c.Status = &snapv1.VolumeSnapshotContentStatus{SnapshotHandle: &handle, ReadyToUse: new(bool)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := sidecartest.Content("c1", "vol-1")
			cur := old.DeepCopy()
			cur.ResourceVersion = tt.rv
			if tt.change != nil {
				tt.change(cur)
			}
			if got := shouldEnqueue(old, cur); got != tt.want {
				t.Errorf("shouldEnqueue = %v, want %v", got, tt.want)
			}
		})
	}
}
