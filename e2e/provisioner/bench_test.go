//go:build bench

package provisioner

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/csimock"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/sidecarrig"
)

const (
	// leaderLease is the leader election Lease, named for the driver by both provisioners: its renewals run on
	// their own clock, not per claim, so they are not counted. Every other Lease write is (Stowage's intent
	// record, <leaderLease>-intents, is a Lease).
	leaderLease = "mock-csi-stowage-io"
	// settle is how long the provision phase's trailing writes (events, a release of Stowage's intent) get
	// before the claims are deleted, so that they are counted with the phase they belong to.
	settle = 2 * time.Second
)

// TestBenchProvisionStorm runs the real upstream csi-provisioner (external-provisioner, built from its module
// at the version e2e/tools pins) and Stowage's, back to back, each on a fresh control plane with an audit
// log, against an instant CSI driver: N claims (Immediate binding) are created at once once the sidecar is
// running, timed until all are Bound; then all are deleted, timed until every PV is gone. Both run at the
// same flags (--kube-api-qps=20 --kube-api-burst=100 --worker-threads=100) and each at its own defaults.
// API writes (claims, PVs, Events and Leases by the sidecar's ServiceAccount, leader election renewals
// excluded) are counted from the audit log. kube-controller-manager is unthrottled so its binder is not what is timed.
// The API server's own write limit is measured first, on a fresh control plane of its own, and each
// sidecar's write rate is printed as a fraction of it. PROVISION_STORM_N overrides N (300).
func TestBenchProvisionStorm(t *testing.T) {
	n := rig.EnvCount(t, "PROVISION_STORM_N", 300)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	upstream, ours := sidecarrig.Upstream(t, sidecarrig.Provisioner()), sidecarrig.Binary(t, sidecarrig.Provisioner())
	limit := sidecarrig.MeasureWriteLimit(t, ctx, stormOptions())
	settings := []struct {
		name string
		args []string
	}{
		{"same flags (qps 20, burst 100, 100 workers)", []string{"--kube-api-qps=20", "--kube-api-burst=100", "--worker-threads=100"}},
		{"own defaults", nil},
	}
	var runs []rig.StormRun
	for _, s := range settings {
		for _, sc := range []struct {
			name, path string
			upstream   bool
		}{{"upstream v6.4.0", upstream, true}, {"Stowage", ours, false}} {
			t.Run(s.name+"/"+sc.name, func(t *testing.T) {
				for _, run := range provisionStorm(t, ctx, sc.path, n, s.args) {
					run.Setting, run.Sidecar, run.Upstream = s.name, sc.name, sc.upstream
					runs = append(runs, run)
				}
			})
		}
	}
	fmt.Printf("\nProvision storm: %d PVCs, Immediate binding, instant CSI driver (csimock), real kube-apiserver, a fresh control plane per row\n", n)
	fmt.Println(limit)
	rig.WriteStormTable(os.Stdout, runs, limit)
	fmt.Println("The sidecar's writes per claim by kind:")
	rig.WriteStormKinds(os.Stdout, runs)
	fmt.Println("When the sidecar wrote its last PV, and kube-controller-manager's binder (one worker) its last claim status (Bound) or PV status (Released):")
	rig.WriteStormMarks(os.Stdout, runs)
	fmt.Println("own defaults: upstream --kube-api-qps=5 --kube-api-burst=10 --worker-threads=100; Stowage no client-side limiter (the server has API Priority and Fairness), 100 workers.")
	fmt.Printf("writes: to claims, PVs, Events and Leases by the sidecar's ServiceAccount, from the audit log, leader election renewals excluded (Stowage's journal, a Lease, counted); provision counts those until %s after all are Bound, delete the rest until the sidecar exited; all clients: the sidecar's and every other client's writes to those (the controller manager's binder, the benchmark's creates and deletes), Leases aside.\n", settle)
	fmt.Println()
}

// stormOptions are a rig with an audit log of the writes to claims, PVs, Events and Leases, and
// kube-controller-manager unthrottled.
func stormOptions() sidecarrig.Options {
	return sidecarrig.Options{
		Sidecars:              []sidecarrig.Sidecar{sidecarrig.Provisioner()},
		Audit:                 []string{"/persistentvolumeclaims", "/persistentvolumes", "/events", "events.k8s.io/events", "coordination.k8s.io/leases"},
		ControllerManagerArgs: []string{"--kube-api-qps=1000", "--kube-api-burst=2000"},
	}
}

// provisionStorm starts a fresh control plane and the csi-provisioner at path with args, creates n claims at
// once and times them to Bound, then deletes them all and times it until every PV is gone.
func provisionStorm(t *testing.T, ctx context.Context, path string, n int, args []string) []rig.StormRun {
	t.Helper()
	r := sidecarrig.Start(t, stormOptions())
	kube, audit := adminClient(t, r), r.Audit
	drv, err := csimock.Start(ctx, csimock.Options{Name: driverName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	const ns, class = "storm", "storm"
	createClass(t, ctx, kube, storageClass(class, storagev1.VolumeBindingImmediate, nil))
	createNamespace(t, ctx, kube, ns)
	p := startProvisionerAt(t, r, path, drv.Endpoint(), args...)
	// Stowage's logs "Caches synced", upstream's "Started provisioner controller", each once its informers
	// synced and its workers run.
	rig.Eventually(t, ctx, 5*time.Minute, "provisioner running", func(context.Context) (bool, error) {
		return p.logContains("Caches synced") || p.logContains("Started provisioner controller"), nil
	})
	counted := func(w rig.AuditWrite) bool {
		return w.User == provisionerUser && !(w.Resource == "leases" && w.Name == leaderLease)
	}
	// What the API server took: the sidecar's counted writes and every other client's but Leases (leader
	// election and the API server's identity).
	server := func(w rig.AuditWrite) bool {
		return counted(w) || (w.User != provisionerUser && w.Resource != "leases")
	}
	// The sidecar's work writes are to PVs (the claims' Events and the journal aside); the controller
	// manager's binder writes the statuses: claims Bound when provisioning, PVs Released when deleting.
	work := func(w rig.AuditWrite) bool { return counted(w) && w.Resource == "persistentvolumes" }
	binder := func(resource string) func(rig.AuditWrite) bool {
		return func(w rig.AuditWrite) bool { return w.User != provisionerUser && w.Resource == resource }
	}
	phase := func(run *rig.StormRun, start time.Time, from, to []rig.AuditWrite, binderStatus string) {
		in := to[len(from):]
		mine := rig.Filter(in, counted)
		run.Writes, run.ServerWrites, run.Kinds = len(mine), len(rig.Filter(in, server)), rig.CountKinds(mine)
		run.Marks = []rig.StormMark{
			{What: "sidecar's last PV write", Seconds: rig.LastWriteSeconds(in, start, work)},
			{What: "binder's last " + binderStatus + " write", Seconds: rig.LastWriteSeconds(in, start, binder(binderStatus))},
		}
	}
	before := audit.MustWrites(t)

	start := time.Now()
	name := func(i int) string { return fmt.Sprintf("pvc-%04d", i) }
	if err := rig.Parallel(n, 32, func(i int) error {
		_, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim(ns, name(i), class, "1Gi"), metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	waitAllClaims(t, ctx, kube, ns, n, 2*time.Hour, fmt.Sprintf("%d claims bound", n), func(c v1.PersistentVolumeClaim) bool { return c.Status.Phase == v1.ClaimBound })
	provision := rig.StormRun{Phase: "provision", Objects: n, Seconds: time.Since(start).Seconds()}
	if vols := len(drv.Volumes()); vols != n {
		t.Errorf("driver holds %d volumes for %d bound claims", vols, n)
	}
	time.Sleep(settle)
	afterProvision := audit.MustWrites(t)
	phase(&provision, start, before, afterProvision, "persistentvolumeclaims/status")

	start = time.Now()
	if err := rig.Parallel(n, 32, func(i int) error {
		err := kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, name(i), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, ctx, 2*time.Hour, fmt.Sprintf("the PVs of %d deleted claims gone", n), func(ctx context.Context) (bool, error) {
		pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		return err == nil && len(pvs.Items) == 0, err
	})
	del := rig.StormRun{Phase: "delete", Objects: n, Seconds: time.Since(start).Seconds()}
	if vols := drv.Volumes(); len(vols) != 0 {
		t.Errorf("driver still holds %d volumes after all PVs are gone", len(vols))
	}
	// Counted once the process is gone, so a write that trailed the last PV's deletion is in the log too.
	p.Signal(syscall.SIGTERM)
	<-p.Done()
	phase(&del, start, afterProvision, audit.MustWrites(t), "persistentvolumes/status")
	leader := rig.Filter(audit.MustWrites(t), func(w rig.AuditWrite) bool {
		return w.User == provisionerUser && w.Resource == "leases" && w.Name == leaderLease
	})
	if len(leader) == 0 {
		t.Errorf("no writes to the leader election Lease %s in the audit log: it is named otherwise, and its renewals were counted as work", leaderLease)
	}
	return []rig.StormRun{provision, del}
}

// waitAllClaims waits until the n claims in ns are all as ok wants them.
func waitAllClaims(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string, n int, timeout time.Duration, what string, ok func(v1.PersistentVolumeClaim) bool) {
	t.Helper()
	rig.Eventually(t, ctx, timeout, what, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil || len(list.Items) != n {
			return false, err
		}
		for _, c := range list.Items {
			if !ok(c) {
				return false, nil
			}
		}
		return true, nil
	})
}
