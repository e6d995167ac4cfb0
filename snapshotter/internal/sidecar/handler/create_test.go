package handler

import (
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/stowage-csi/stowage/snapshotter/internal/sidecar/sidecartest"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

const snapName = "snapshot-1b6e3e2a-7c1d-4f5e-9a0b-123456789abc"

func readySnapshot(ready bool) *csi.Snapshot {
	return &csi.Snapshot{SnapshotId: "snap-1", SourceVolumeId: "vol-1", SizeBytes: 1 << 30, ReadyToUse: ready,
		CreationTime: timestamppb.New(testNow.Add(-time.Minute))}
}

func TestCreate(t *testing.T) {
	secretClass := sidecartest.Class(map[string]string{
		"type":                                  "gp3",
		snapapi.ParamSnapshotterSecretName:      "${volumesnapshot.name}-creds",
		snapapi.ParamSnapshotterSecretNamespace: "${volumesnapshot.namespace}",
	})
	tests := []struct {
		name      string
		csi       *sidecartest.FakeCSI
		content   *snapv1.VolumeSnapshotContent
		objs      []runtime.Object
		configure func(*Config)
		wantErr   bool
		wantAgain time.Duration
		// requests to the snapshot API and to the core API, in order
		wantSnap, wantKube []string
		wantCreate         *csi.CreateSnapshotRequest
		wantEvents         []string
		check              func(t *testing.T, c *snapv1.VolumeSnapshotContent)
	}{
		{
			name:    "ready on the first call: annotation, status, annotation removed",
			csi:     &sidecartest.FakeCSI{Snapshot: readySnapshot(true)},
			content: sidecartest.Content("c1", "vol-1"),
			objs:    []runtime.Object{sidecartest.Class(map[string]string{"type": "gp3"})},
			wantSnap: []string{
				"patch volumesnapshotcontents c1",
				"patch volumesnapshotcontents/status c1",
				"patch volumesnapshotcontents c1",
			},
			wantCreate: &csi.CreateSnapshotRequest{Name: snapName, SourceVolumeId: "vol-1", Parameters: map[string]string{"type": "gp3"}},
			check: func(t *testing.T, c *snapv1.VolumeSnapshotContent) {
				if _, ok := c.Annotations[snapapi.AnnBeingCreated]; ok {
					t.Error("being-created annotation left after success")
				}
				s := c.Status
				if s == nil || *s.SnapshotHandle != "snap-1" || !*s.ReadyToUse || *s.RestoreSize != 1<<30 ||
					*s.CreationTime != testNow.Add(-time.Minute).UnixNano() || s.Error != nil {
					t.Errorf("status = %+v, want snap-1 ready, 1Gi, creation time from the driver", s)
				}
			},
		},
		{
			name:      "not ready: status written, annotation removed, polled again",
			csi:       &sidecartest.FakeCSI{Snapshot: readySnapshot(false)},
			content:   sidecartest.Content("c1", "vol-1"),
			objs:      []runtime.Object{sidecartest.Class(nil)},
			wantAgain: pollInterval,
			wantSnap: []string{
				"patch volumesnapshotcontents c1",
				"patch volumesnapshotcontents/status c1",
				"patch volumesnapshotcontents c1",
			},
			wantCreate: &csi.CreateSnapshotRequest{Name: snapName, SourceVolumeId: "vol-1", Parameters: map[string]string{}},
			check: func(t *testing.T, c *snapv1.VolumeSnapshotContent) {
				if c.Status == nil || *c.Status.ReadyToUse || *c.Status.SnapshotHandle != "snap-1" {
					t.Errorf("status = %+v, want snap-1 not ready", c.Status)
				}
			},
		},
		{
			name:       "annotation already set by an earlier try: not written again",
			csi:        &sidecartest.FakeCSI{Snapshot: readySnapshot(true)},
			content:    sidecartest.Content("c1", "vol-1", beingCreatedAnn),
			objs:       []runtime.Object{sidecartest.Class(nil)},
			wantSnap:   []string{"patch volumesnapshotcontents/status c1", "patch volumesnapshotcontents c1"},
			wantCreate: &csi.CreateSnapshotRequest{Name: snapName, SourceVolumeId: "vol-1", Parameters: map[string]string{}},
		},
		{
			name:    "secret from the class, templated; prefixed keys stripped; extra metadata; short name",
			csi:     &sidecartest.FakeCSI{Snapshot: readySnapshot(true)},
			content: sidecartest.Content("c1", "vol-1"),
			objs:    []runtime.Object{secretClass, secret("ns", "snap-creds")},
			configure: func(c *Config) {
				c.ExtraCreateMetadata = true
				c.NamePrefix = "ebs"
				c.NameUUIDLength = 8
			},
			wantKube: []string{"get secrets snap-creds"},
			wantSnap: []string{
				"patch volumesnapshotcontents c1",
				"patch volumesnapshotcontents/status c1",
				"patch volumesnapshotcontents c1",
			},
			wantCreate: &csi.CreateSnapshotRequest{Name: "ebs-1b6e3e2a", SourceVolumeId: "vol-1",
				Secrets: map[string]string{"user": "snap-creds"},
				Parameters: map[string]string{"type": "gp3", snapapi.MetaSnapshotName: "snap",
					snapapi.MetaSnapshotNamespace: "ns", snapapi.MetaContentName: "c1"}},
		},
		{
			name:     "secret recorded by the snapshot controller wins over the class's",
			csi:      &sidecartest.FakeCSI{Snapshot: readySnapshot(true)},
			content:  sidecartest.Content("c1", "vol-1", withAnnotations(snapapi.AnnDeletionSecretName, "recorded", snapapi.AnnDeletionSecretNamespace, "kube-system")),
			objs:     []runtime.Object{secretClass, secret("kube-system", "recorded")},
			wantKube: []string{"get secrets recorded"},
			wantSnap: []string{
				"patch volumesnapshotcontents c1",
				"patch volumesnapshotcontents/status c1",
				"patch volumesnapshotcontents c1",
			},
			wantCreate: &csi.CreateSnapshotRequest{Name: snapName, SourceVolumeId: "vol-1",
				Secrets: map[string]string{"user": "recorded"}, Parameters: map[string]string{"type": "gp3"}},
		},
		{
			name:       "final error: annotation removed, error in status, Event",
			csi:        &sidecartest.FakeCSI{CreateErr: status.Error(codes.NotFound, "no volume vol-1")},
			content:    sidecartest.Content("c1", "vol-1"),
			objs:       []runtime.Object{sidecartest.Class(nil)},
			wantErr:    true,
			wantSnap:   []string{"patch volumesnapshotcontents c1", "patch volumesnapshotcontents c1", "patch volumesnapshotcontents/status c1"},
			wantCreate: &csi.CreateSnapshotRequest{Name: snapName, SourceVolumeId: "vol-1", Parameters: map[string]string{}},
			wantEvents: []string{"Warning " + ReasonCreationFailed},
			check: func(t *testing.T, c *snapv1.VolumeSnapshotContent) {
				if _, ok := c.Annotations[snapapi.AnnBeingCreated]; ok {
					t.Error("being-created annotation kept after a final error")
				}
				if c.Status == nil || c.Status.Error == nil || c.Status.ReadyToUse == nil || *c.Status.ReadyToUse {
					t.Errorf("status = %+v, want error and readyToUse false", c.Status)
				}
			},
		},
		{
			name:       "timeout: annotation kept (maybe in progress), error in status",
			csi:        &sidecartest.FakeCSI{CreateErr: status.Error(codes.DeadlineExceeded, "slow")},
			content:    sidecartest.Content("c1", "vol-1"),
			objs:       []runtime.Object{sidecartest.Class(nil)},
			wantErr:    true,
			wantSnap:   []string{"patch volumesnapshotcontents c1", "patch volumesnapshotcontents/status c1"},
			wantCreate: &csi.CreateSnapshotRequest{Name: snapName, SourceVolumeId: "vol-1", Parameters: map[string]string{}},
			wantEvents: []string{"Warning " + ReasonCreationFailed},
			check: func(t *testing.T, c *snapv1.VolumeSnapshotContent) {
				if c.Annotations[snapapi.AnnBeingCreated] != "yes" {
					t.Error("being-created annotation removed after a timeout")
				}
			},
		},
		{
			name: "a retry failing the same way writes nothing",
			csi:  &sidecartest.FakeCSI{CreateErr: status.Error(codes.Unavailable, "down")},
			content: sidecartest.Content("c1", "vol-1", beingCreatedAnn, func(c *snapv1.VolumeSnapshotContent) {
				msg := "Failed to create snapshot: CreateSnapshot \"" + snapName + "\" of volume vol-1: rpc error: code = Unavailable desc = down"
				c.Status = &snapv1.VolumeSnapshotContentStatus{ReadyToUse: ptr(false), Error: &snapv1.VolumeSnapshotError{Message: &msg}}
			}),
			objs:       []runtime.Object{sidecartest.Class(nil)},
			wantErr:    true,
			wantCreate: &csi.CreateSnapshotRequest{Name: snapName, SourceVolumeId: "vol-1", Parameters: map[string]string{}},
		},
		{
			name:       "missing class: error in status, no CSI call, no annotation",
			content:    sidecartest.Content("c1", "vol-1"),
			wantErr:    true,
			wantSnap:   []string{"patch volumesnapshotcontents/status c1"},
			wantEvents: []string{"Warning " + ReasonCreationFailed},
		},
		{
			name:       "unknown reserved parameter is refused before any call",
			content:    sidecartest.Content("c1", "vol-1"),
			objs:       []runtime.Object{sidecartest.Class(map[string]string{"csi.storage.k8s.io/fstype": "ext4"})},
			wantErr:    true,
			wantSnap:   []string{"patch volumesnapshotcontents/status c1"},
			wantEvents: []string{"Warning " + ReasonCreationFailed},
		},
		{
			name:       "not bound to a VolumeSnapshot yet: no name, no call",
			content:    sidecartest.Content("c1", "vol-1", func(c *snapv1.VolumeSnapshotContent) { c.Spec.VolumeSnapshotRef.UID = "" }),
			objs:       []runtime.Object{sidecartest.Class(nil)},
			wantErr:    true,
			wantSnap:   []string{"patch volumesnapshotcontents/status c1"},
			wantEvents: []string{"Warning " + ReasonCreationFailed},
		},
		{
			name:     "ready content with a leftover annotation: only the annotation goes",
			content:  sidecartest.Content("c1", "vol-1", beingCreatedAnn, withStatus("snap-1", true)),
			objs:     []runtime.Object{sidecartest.Class(nil)},
			wantSnap: []string{"patch volumesnapshotcontents c1"},
		},
		{
			name:    "ready content: nothing",
			content: sidecartest.Content("c1", "vol-1", withStatus("snap-1", true)),
			objs:    []runtime.Object{sidecartest.Class(nil)},
		},
		{
			name:    "content of another driver is ignored",
			content: sidecartest.Content("c1", "vol-1", func(c *snapv1.VolumeSnapshotContent) { c.Spec.Driver = "other" }),
		},
		{
			// As upstream's snapshot-controller creates a member content: its annotation (spelled out, the key
			// the other half reads), a volume handle and no status until the controller's next write.
			name:    "group member is left to the group",
			content: sidecartest.Content("c1", "vol-1", withAnnotations("groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle", "group-1")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, tt.csi, tt.content, tt.objs, tt.configure)
			e.syncStored(t, tt.content.Name, syncWant{err: tt.wantErr, again: tt.wantAgain, snap: tt.wantSnap, kube: tt.wantKube, evs: tt.wantEvents})
			switch {
			case tt.wantCreate == nil && len(e.csi.Creates) > 0:
				t.Errorf("CreateSnapshot called %d times, want 0", len(e.csi.Creates))
			case tt.wantCreate != nil && len(e.csi.Creates) != 1:
				t.Errorf("CreateSnapshot called %d times, want 1", len(e.csi.Creates))
			case tt.wantCreate != nil && !proto.Equal(e.csi.Creates[0], tt.wantCreate):
				t.Errorf("CreateSnapshot request = %v, want %v", e.csi.Creates[0], tt.wantCreate)
			}
			if tt.check != nil {
				tt.check(t, e.content(t, tt.content.Name))
			}
		})
	}
}

// A cached copy that our own writes have replaced is not acted on again: the worker waits for the cache
// instead of calling CreateSnapshot a second time and patching with a stale resourceVersion.
func TestStaleCopyWaitsForTheCache(t *testing.T) {
	content := sidecartest.Content("c1", "vol-1")
	e := setup(t, &sidecartest.FakeCSI{Snapshot: readySnapshot(true)}, content, []runtime.Object{sidecartest.Class(nil)}, nil)
	stored := e.stored(t, "c1")
	if _, err := e.h.Sync(testContext(t), stored); err != nil {
		t.Fatal(err)
	}
	again, err := e.h.Sync(testContext(t), stored)
	if err != nil || again != staleRetry {
		t.Errorf("Sync of the superseded copy = %s, %v; want a retry after %s", again, err, staleRetry)
	}
	if n := len(e.csi.Creates); n != 1 {
		t.Errorf("CreateSnapshot called %d times, want 1", n)
	}
	fresh := e.content(t, "c1")
	if again, err := e.h.Sync(testContext(t), fresh); err != nil || again != 0 || len(e.csi.Creates) != 1 {
		t.Errorf("Sync of the current copy = %s, %v with %d CreateSnapshot calls; want done, no new call", again, err, len(e.csi.Creates))
	}
}
