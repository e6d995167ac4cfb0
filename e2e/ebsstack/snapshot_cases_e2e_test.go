//go:build e2e

package ebsstack

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

const (
	retainClass = "stowage-ebs-snapclass-retain"
	// preContent is the pre-provisioned VolumeSnapshotContent; its VolumeSnapshot is snapshotName, the one
	// scenario 4's restore helpers restore from.
	preContent = "preprovisioned-data-0"
	// slowCreate holds each CreateSnapshot in ec2sim before it runs, long enough to delete a VolumeSnapshot or
	// kill csi-snapshotter meanwhile; a kill releases it at once (the caller's connection closes).
	slowCreate = 8 * time.Second
)

// TestE2EEBSSnapshotCases runs the snapshot cases of stowage-csi/stowage#15 on one EBS stack with Stowage's
// snapshot-controller and csi-snapshotter (upstream's manifest args): a pre-provisioned content over an EBS
// snapshot made in EC2 directly; Retain against Delete for dynamic snapshots; a VolumeSnapshot deleted while
// CreateSnapshot is in flight; csi-snapshotter killed with SIGKILL mid-create, with the VolumeSnapshot kept
// and deleted while it is down. Each case leaves EC2 and the API as it found them, and scenario 5 finally
// checks that EC2 holds nothing.
func TestE2EEBSSnapshotCases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s := startTestStack(ctx, t, Options{UpstreamArgs: true, With: SnapshotSidecars}, nil)
	var out strings.Builder
	l, err := NewLifecycle(s.Stack, NewReport(&out))
	if err != nil {
		t.Fatal(err)
	}
	if !t.Run("provision", func(t *testing.T) {
		if err := l.Provision(ctx); err != nil {
			t.Fatalf("scenario 1: %v", err)
		}
	}) {
		t.Fatalf("steps:%s", out.String())
	}
	c, err := newSnapshotCases(ctx, s.Stack, l)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, sc := range []struct {
		name string
		run  func(context.Context) (string, error)
	}{
		{"pre-provisioned content, Retain", c.preProvisioned},
		{"Retain and Delete", c.retainAndDelete},
		{"delete during CreateSnapshot", c.deleteDuringCreate},
		{"kill -9 mid-create", func(ctx context.Context) (string, error) { return c.killMidCreate(ctx, "kill-0", false) }},
		{"kill -9 mid-create, deleted while down", func(ctx context.Context) (string, error) { return c.killMidCreate(ctx, "kill-1", true) }},
	} {
		t.Run(sc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, StepTimeout)
			defer cancel()
			began := time.Now()
			msg, err := sc.run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s (%s)", msg, time.Since(began).Round(100*time.Millisecond))
		})
	}
	t.Logf("snapshot cases took %s", time.Since(start).Round(time.Second))
	t.Run("delete", func(t *testing.T) {
		if err := l.Delete(ctx); err != nil {
			t.Fatalf("scenario 5: %v", err)
		}
	})
	t.Logf("steps:%s", out.String())
	s.stopLeavesNothing(t)
}

// snapshotCases hold what the cases share: scenario 1's volume (data-0, holding data.bin), the snapshot
// client, and an EC2 client of the emulator for what is done outside Kubernetes.
type snapshotCases struct {
	// s is the stack under l: the cases kill and restart its csi-snapshotter process.
	s     *Stack
	l     *Lifecycle
	snaps snapclient.Interface
	ec2   *ec2.Client
}

func newSnapshotCases(ctx context.Context, s *Stack, l *Lifecycle) (*snapshotCases, error) {
	snaps, err := snapclient.NewForConfig(l.P.RESTConfig())
	if err != nil {
		return nil, err
	}
	c := &snapshotCases{s: s, l: l, snaps: snaps, ec2: ec2.New(ec2.Options{
		Region: Region, BaseEndpoint: aws.String(l.P.EC2().URL()),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDSTOWAGEE2E", "stowage-e2e-secret", ""),
	})}
	for name, policy := range map[string]snapv1.DeletionPolicy{snapshotClass: snapv1.VolumeSnapshotContentDelete, retainClass: snapv1.VolumeSnapshotContentRetain} {
		_, err := snaps.SnapshotV1().VolumeSnapshotClasses().Create(ctx, &snapv1.VolumeSnapshotClass{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: Driver, DeletionPolicy: policy,
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	return c, nil
}

// preProvisioned snapshots data-0's volume in EC2 directly, imports the snapshot with a
// VolumeSnapshotContent naming its handle (Retain) and a VolumeSnapshot bound to it, restores it in node C's
// zone and reads the same bytes. Deleting the VolumeSnapshot leaves the content; deleting the content leaves
// the EBS snapshot, which is then deleted in EC2.
func (c *snapshotCases) preProvisioned(ctx context.Context) (string, error) {
	made, err := c.ec2.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: aws.String(c.l.volumeID), Description: aws.String("made outside Kubernetes")})
	if err != nil {
		return "", fmt.Errorf("EC2 CreateSnapshot of %s: %w", c.l.volumeID, err)
	}
	id := aws.ToString(made.SnapshotId)
	api := c.snaps.SnapshotV1()
	if _, err := api.VolumeSnapshotContents().Create(ctx, &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: preContent},
		Spec: snapv1.VolumeSnapshotContentSpec{
			DeletionPolicy: snapv1.VolumeSnapshotContentRetain, Driver: Driver,
			Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &id},
			VolumeSnapshotRef: v1.ObjectReference{Namespace: Namespace, Name: snapshotName},
		},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	content := preContent
	if _, err := api.VolumeSnapshots(Namespace).Create(ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: snapshotName},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &content}},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	vs, bound, err := c.waitReady(ctx, snapshotName)
	if err != nil {
		return "", err
	}
	if bound.Name != preContent || handle(bound) != id {
		return "", fmt.Errorf("VolumeSnapshot %s bound to %s (handle %q), want %s (handle %s)", snapshotName, bound.Name, handle(bound), preContent, id)
	}
	r := &restore{l: c.l, snaps: c.snaps, snapshotID: id}
	for _, run := range []func(context.Context) (string, error){r.restoreOnC, r.checkRestoredData} {
		if _, err := run(ctx); err != nil {
			return "", err
		}
	}
	if err := c.l.deleteRestore(ctx); err != nil {
		return "", err
	}
	if err := c.deleteRetained(ctx, vs, id); err != nil {
		return "", err
	}
	return fmt.Sprintf("EBS snapshot %s made in EC2, imported as %s (Retain) and %s: readyToUse, restored in %s's zone with the same bytes; "+
		"VolumeSnapshot and content deleted, EBS snapshot kept", id, preContent, snapshotName, c.l.NodeC), nil
}

// retainAndDelete takes one dynamic snapshot of each class: deleting the VolumeSnapshot of the Retain class
// leaves its content and EBS snapshot (and deleting the content still leaves the EBS snapshot); deleting the
// one of the Delete class deletes both.
func (c *snapshotCases) retainAndDelete(ctx context.Context) (string, error) {
	vs, err := c.createSnapshot(ctx, "retain-0", retainClass)
	if err != nil {
		return "", err
	}
	ready, retained, err := c.waitReady(ctx, vs.Name)
	if err != nil {
		return "", err
	}
	kept := handle(retained)
	if err := c.deleteRetained(ctx, ready, kept); err != nil {
		return "", err
	}
	if vs, err = c.createSnapshot(ctx, "delete-0", snapshotClass); err != nil {
		return "", err
	}
	_, deleted, err := c.waitReady(ctx, vs.Name)
	if err != nil {
		return "", err
	}
	if err := c.snaps.SnapshotV1().VolumeSnapshots(Namespace).Delete(ctx, vs.Name, metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	if err := c.waitAllGone(ctx, vs); err != nil {
		return "", err
	}
	return fmt.Sprintf("Retain: VolumeSnapshot deleted, content %s and EBS snapshot %s kept (and the EBS snapshot after the content); "+
		"Delete: VolumeSnapshot deleted, content %s and EBS snapshot %s gone", retained.Name, kept, deleted.Name, handle(deleted)), nil
}

// deleteDuringCreate holds CreateSnapshot in ec2sim and deletes the VolumeSnapshot while csi-snapshotter's
// call is held there: snapshot-controller asks for the content's deletion before EC2 answers, EC2 then makes
// the snapshot, and csi-snapshotter must delete it, so neither an EBS snapshot nor a content is left.
func (c *snapshotCases) deleteDuringCreate(ctx context.Context) (string, error) {
	ec2s := c.l.P.EC2()
	creates, deletes := ec2s.Requests("CreateSnapshot", "OK"), ec2s.Requests("DeleteSnapshot", "OK")
	restoreFaults := slowCreateSnapshot(ec2s, slowCreate)
	defer restoreFaults()
	vs, err := c.createSnapshot(ctx, "inflight-0", snapshotClass)
	if err != nil {
		return "", err
	}
	if err := waitHeldCreate(ctx, ec2s); err != nil {
		return "", err
	}
	if err := c.snaps.SnapshotV1().VolumeSnapshots(Namespace).Delete(ctx, vs.Name, metav1.DeleteOptions{}); err != nil {
		return "", err
	}
	content, err := c.waitContentDeleting(ctx, vs)
	if err != nil {
		return "", err
	}
	if n := ec2s.Requests("CreateSnapshot", "OK"); n != creates {
		return "", fmt.Errorf("EC2 answered CreateSnapshot before content %s was being deleted: not in flight (%s latency too short?)", content, slowCreate)
	}
	if err := c.waitCreateAnswered(ctx, creates+1); err != nil {
		return "", err
	}
	if err := c.waitAllGone(ctx, vs); err != nil {
		return "", err
	}
	if ec2s.Requests("DeleteSnapshot", "OK") == deletes {
		return "", fmt.Errorf("no EC2 DeleteSnapshot for the snapshot CreateSnapshot made after %s was deleted", vs.Name)
	}
	return fmt.Sprintf("VolumeSnapshot %s deleted while ec2sim held its CreateSnapshot; EC2 made the snapshot after content %s was being deleted, "+
		"and csi-snapshotter deleted it: no EBS snapshot, content or VolumeSnapshot left", vs.Name, content), nil
}

// killMidCreate kills csi-snapshotter with SIGKILL while ec2sim holds its CreateSnapshot; the held call then
// runs for a caller that is gone, so EC2 holds a snapshot no content records. With deleteWhileDown the
// VolumeSnapshot is deleted before csi-snapshotter is started again, which must then delete that snapshot;
// otherwise the restarted csi-snapshotter must adopt it: readyToUse with exactly that one snapshot.
func (c *snapshotCases) killMidCreate(ctx context.Context, name string, deleteWhileDown bool) (string, error) {
	s := c.s
	creates := s.EC2.Requests("CreateSnapshot", "OK")
	restoreFaults := slowCreateSnapshot(s.EC2, slowCreate)
	defer restoreFaults()
	vs, err := c.createSnapshot(ctx, name, snapshotClass)
	if err != nil {
		return "", err
	}
	if err := waitHeldCreate(ctx, s.EC2); err != nil {
		return "", err
	}
	if s.EC2.Requests("CreateSnapshot", "OK") != creates {
		return "", fmt.Errorf("EC2 answered CreateSnapshot of %s before the kill: not in flight (%s latency too short?)", vs.Name, slowCreate)
	}
	killed := s.Sidecar("csi-snapshotter").Pid()
	if err := s.Kill(ctx, "csi-snapshotter"); err != nil {
		return "", err
	}
	if err := c.waitCreateAnswered(ctx, creates+1); err != nil {
		return "", err
	}
	made := c.namedSnapshots(vs)
	if len(made) != 1 {
		return "", fmt.Errorf("EC2 holds %v for %s after the held CreateSnapshot ran, want one", made, vs.Name)
	}
	restoreFaults()
	what := "readyToUse with it, then deleted with it"
	if deleteWhileDown {
		if err := c.snaps.SnapshotV1().VolumeSnapshots(Namespace).Delete(ctx, vs.Name, metav1.DeleteOptions{}); err != nil {
			return "", err
		}
		if _, err := c.waitContentDeleting(ctx, vs); err != nil {
			return "", err
		}
		what = "deleted with its content, VolumeSnapshot deleted while csi-snapshotter was down"
	}
	p, err := s.Restart(ctx, "csi-snapshotter")
	if err != nil {
		return "", err
	}
	if deleteWhileDown {
		err = c.waitAllGone(ctx, vs)
	} else {
		err = c.adopted(ctx, vs, made[0].ID)
	}
	if err != nil {
		return "", err
	}
	if n := s.EC2.Requests("CreateSnapshot", "OK") - creates; n != 1 {
		return "", fmt.Errorf("EC2 carried out %d CreateSnapshot for %s, want 1: the restarted csi-snapshotter made another", n, vs.Name)
	}
	return fmt.Sprintf("csi-snapshotter (pid %d) killed while ec2sim held CreateSnapshot of %s; EC2 made %s for the dead caller; restarted (pid %d): %s, one EC2 CreateSnapshot in all",
		killed, vs.Name, made[0].ID, p.Pid(), what), nil
}

// adopted waits until vs is ready with the snapshot id the killed csi-snapshotter's call made, the only one
// EC2 holds for it, then deletes vs and waits until the content and the snapshot are gone.
func (c *snapshotCases) adopted(ctx context.Context, vs *snapv1.VolumeSnapshot, id string) error {
	_, content, err := c.waitReady(ctx, vs.Name)
	if err != nil {
		return err
	}
	if handle(content) != id {
		return fmt.Errorf("content %s has handle %s, want %s, the snapshot the killed process's call made", content.Name, handle(content), id)
	}
	if got := c.namedSnapshots(vs); len(got) != 1 {
		return fmt.Errorf("EC2 holds %v for ready VolumeSnapshot %s, want only %s", got, vs.Name, id)
	}
	if err := c.snaps.SnapshotV1().VolumeSnapshots(Namespace).Delete(ctx, vs.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return c.waitAllGone(ctx, vs)
}

// createSnapshot creates a VolumeSnapshot of data-0 of class.
func (c *snapshotCases) createSnapshot(ctx context.Context, name, class string) (*snapv1.VolumeSnapshot, error) {
	claim := sourceClaim
	return c.snaps.SnapshotV1().VolumeSnapshots(Namespace).Create(ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim}, VolumeSnapshotClassName: &class},
	}, metav1.CreateOptions{})
}

// waitReady waits until the VolumeSnapshot is bound and readyToUse and returns it with its content, whose
// handle must be a completed snapshot in EC2.
func (c *snapshotCases) waitReady(ctx context.Context, name string) (*snapv1.VolumeSnapshot, *snapv1.VolumeSnapshotContent, error) {
	api := c.snaps.SnapshotV1()
	var vs *snapv1.VolumeSnapshot
	err := poll(ctx, "VolumeSnapshot "+name+" readyToUse", func(ctx context.Context) (bool, string, error) {
		var err error
		if vs, err = api.VolumeSnapshots(Namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, "", err
		}
		st := vs.Status
		return st != nil && st.BoundVolumeSnapshotContentName != nil && st.ReadyToUse != nil && *st.ReadyToUse, fmt.Sprintf("status %+v", st), nil
	})
	if err != nil {
		return nil, nil, err
	}
	content, err := api.VolumeSnapshotContents().Get(ctx, *vs.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	if st, err := c.l.ec2Snapshot(handle(content)); err != nil || st.State != "completed" {
		return nil, nil, fmt.Errorf("content %s of ready VolumeSnapshot %s: EBS snapshot %q is %q (%v)", content.Name, name, handle(content), st.State, err)
	}
	return vs, content, nil
}

// deleteRetained deletes a ready (bound) VolumeSnapshot whose content has policy Retain: once the VolumeSnapshot is
// gone the content must still be there, not being deleted; once the content is deleted too, the EBS snapshot
// id must still be in EC2. It is then deleted in EC2 directly, as its owner would.
func (c *snapshotCases) deleteRetained(ctx context.Context, vs *snapv1.VolumeSnapshot, id string) error {
	api := c.snaps.SnapshotV1()
	name := *vs.Status.BoundVolumeSnapshotContentName
	if err := api.VolumeSnapshots(Namespace).Delete(ctx, vs.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := waitNotFound(ctx, "VolumeSnapshot "+vs.Name, func(ctx context.Context) error {
		_, err := api.VolumeSnapshots(Namespace).Get(ctx, vs.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	content, err := api.VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("content %s (Retain) after its VolumeSnapshot was deleted: %w", name, err)
	}
	if content.DeletionTimestamp != nil || handle(content) != id {
		return fmt.Errorf("content %s (Retain) after its VolumeSnapshot was deleted: deletion %v, handle %q; want kept with handle %s", name, content.DeletionTimestamp, handle(content), id)
	}
	if _, err := c.l.ec2Snapshot(id); err != nil {
		return fmt.Errorf("after VolumeSnapshot %s (Retain) was deleted: %w", vs.Name, err)
	}
	if err := api.VolumeSnapshotContents().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := waitNotFound(ctx, "VolumeSnapshotContent "+name, func(ctx context.Context) error {
		_, err := api.VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	if _, err := c.l.ec2Snapshot(id); err != nil {
		return fmt.Errorf("after content %s (Retain) was deleted: %w", name, err)
	}
	if _, err := c.ec2.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String(id)}); err != nil {
		return fmt.Errorf("EC2 DeleteSnapshot %s: %w", id, err)
	}
	return nil
}

// waitAllGone waits until the VolumeSnapshot, every content bound to it, and every EBS snapshot named after
// it are gone.
func (c *snapshotCases) waitAllGone(ctx context.Context, vs *snapv1.VolumeSnapshot) error {
	api := c.snaps.SnapshotV1()
	return poll(ctx, "VolumeSnapshot "+vs.Name+", its content and its EBS snapshot gone", func(ctx context.Context) (bool, string, error) {
		if _, err := api.VolumeSnapshots(Namespace).Get(ctx, vs.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("VolumeSnapshot still there (%v)", err), nil
		}
		contents, err := c.contentsOf(ctx, vs.UID)
		if err != nil {
			return false, "", err
		}
		if len(contents) > 0 {
			return false, fmt.Sprintf("contents %v still there", contents), nil
		}
		if left := c.namedSnapshots(vs); len(left) > 0 {
			return false, fmt.Sprintf("EBS snapshots %v still there", left), nil
		}
		return true, "", nil
	})
}

// waitContentDeleting waits until the content bound to vs is being deleted (snapshot-controller has acted on
// the VolumeSnapshot's deletion) and returns its name.
func (c *snapshotCases) waitContentDeleting(ctx context.Context, vs *snapv1.VolumeSnapshot) (string, error) {
	var name string
	err := poll(ctx, "content of "+vs.Name+" being deleted", func(ctx context.Context) (bool, string, error) {
		list, err := c.snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, ct := range list.Items {
			if ct.Spec.VolumeSnapshotRef.UID == vs.UID {
				name = ct.Name
				return ct.DeletionTimestamp != nil, fmt.Sprintf("content %s, finalizers %v, annotations %v", ct.Name, ct.Finalizers, ct.Annotations), nil
			}
		}
		return false, "no content yet", nil
	})
	return name, err
}

// contentsOf lists the names of the contents bound to the VolumeSnapshot with uid.
func (c *snapshotCases) contentsOf(ctx context.Context, uid types.UID) ([]string, error) {
	list, err := c.snaps.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ct := range list.Items {
		if ct.Spec.VolumeSnapshotRef.UID == uid {
			out = append(out, ct.Name)
		}
	}
	return out, nil
}

// namedSnapshots are the EBS snapshots ebs-plugin made for vs: tagged with csi-snapshotter's name for it,
// snapshot-<UID>.
func (c *snapshotCases) namedSnapshots(vs *snapv1.VolumeSnapshot) []ec2sim.SnapshotState {
	var out []ec2sim.SnapshotState
	for _, sn := range c.l.P.EC2().State().Snapshots {
		if sn.Tags["CSIVolumeSnapshotName"] == "snapshot-"+string(vs.UID) {
			out = append(out, sn)
		}
	}
	return out
}

// waitCreateAnswered waits until ec2sim has answered want CreateSnapshot requests with OK in all.
func (c *snapshotCases) waitCreateAnswered(ctx context.Context, want int) error {
	return poll(ctx, fmt.Sprintf("EC2 CreateSnapshot answered OK %d times", want), func(context.Context) (bool, string, error) {
		n := c.l.P.EC2().Requests("CreateSnapshot", "OK")
		return n == want, fmt.Sprintf("%d", n), nil
	})
}

// slowCreateSnapshot makes ec2sim hold every CreateSnapshot for latency before carrying it out, and returns
// the function that puts the faults back as they were (safe to call twice).
func slowCreateSnapshot(s *ec2sim.Server, latency time.Duration) func() {
	before := s.Faults()
	slow := before
	slow.Actions, slow.Latency = []string{"CreateSnapshot"}, latency
	s.SetFaults(slow)
	return func() { s.SetFaults(before) }
}

// waitHeldCreate waits until ec2sim holds exactly one CreateSnapshot in its added latency (slowCreateSnapshot).
func waitHeldCreate(ctx context.Context, ec2 *ec2sim.Server) error {
	return poll(ctx, "ec2sim holding a CreateSnapshot", func(context.Context) (bool, string, error) {
		n := ec2.InFlight("CreateSnapshot")
		return n == 1, fmt.Sprintf("%d held", n), nil
	})
}

// waitNotFound waits until get answers NotFound.
func waitNotFound(ctx context.Context, what string, get func(context.Context) error) error {
	return poll(ctx, what+" gone", func(ctx context.Context) (bool, string, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, fmt.Sprintf("still there (%v)", err), nil
	})
}

// handle is the content's snapshot handle: its status's, or its spec's for a pre-provisioned content.
func handle(c *snapv1.VolumeSnapshotContent) string {
	if c.Status != nil && c.Status.SnapshotHandle != nil {
		return *c.Status.SnapshotHandle
	}
	if c.Spec.Source.SnapshotHandle != nil {
		return *c.Spec.Source.SnapshotHandle
	}
	return ""
}
