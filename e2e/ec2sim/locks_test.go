package ec2sim

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// startLocks starts an emulator on a fake clock with one available volume, and returns a function that
// snapshots it.
func startLocks(t *testing.T) (*ec2.Client, *fakeClock, func() *string) {
	t.Helper()
	s, clk := startFake(t, nil)
	c := newClient(t, s)
	vol, err := c.CreateVolume(ctxT(t), &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(createMax)
	return c, clk, func() *string {
		t.Helper()
		out, err := c.CreateSnapshot(ctxT(t), &ec2.CreateSnapshotInput{VolumeId: vol.VolumeId})
		if err != nil {
			t.Fatal(err)
		}
		return out.SnapshotId
	}
}

func TestLockSnapshotValidation(t *testing.T) {
	c, _, newSnap := startLocks(t)
	ctx := ctxT(t)
	for _, tt := range []struct {
		name string
		in   ec2.LockSnapshotInput
		code string
	}{
		{"bad mode", ec2.LockSnapshotInput{LockMode: "forever", LockDuration: aws.Int32(1)}, "InvalidParameterValue"},
		{"neither duration nor date", ec2.LockSnapshotInput{LockMode: types.LockModeGovernance}, "InvalidParameterCombination"},
		{"duration and date", ec2.LockSnapshotInput{LockMode: types.LockModeGovernance, LockDuration: aws.Int32(1), ExpirationDate: aws.Time(time.Now().Add(time.Hour))}, "InvalidParameterCombination"},
		{"duration too long", ec2.LockSnapshotInput{LockMode: types.LockModeGovernance, LockDuration: aws.Int32(36501)}, "InvalidParameterValue"},
		{"cool-off in governance", ec2.LockSnapshotInput{LockMode: types.LockModeGovernance, LockDuration: aws.Int32(1), CoolOffPeriod: aws.Int32(1)}, "InvalidParameterCombination"},
		{"cool-off too long", ec2.LockSnapshotInput{LockMode: types.LockModeCompliance, LockDuration: aws.Int32(1), CoolOffPeriod: aws.Int32(73)}, "InvalidParameterValue"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			in.SnapshotId = newSnap()
			_, err := c.LockSnapshot(ctx, &in)
			wantCode(t, err, tt.code)
		})
	}
	_, err := c.LockSnapshot(ctx, &ec2.LockSnapshotInput{SnapshotId: aws.String("snap-00000000000000001"), LockMode: types.LockModeGovernance, LockDuration: aws.Int32(1)})
	wantCode(t, err, "InvalidSnapshot.NotFound")
	_, err = c.UnlockSnapshot(ctx, &ec2.UnlockSnapshotInput{SnapshotId: newSnap()})
	wantCode(t, err, "IncorrectState")
}

// A governance lock refuses deletion until it is removed.
func TestGovernanceLock(t *testing.T) {
	c, _, newSnap := startLocks(t)
	ctx := ctxT(t)
	gov := newSnap()
	out, err := c.LockSnapshot(ctx, &ec2.LockSnapshotInput{SnapshotId: gov, LockMode: types.LockModeGovernance, LockDuration: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	if out.LockState != types.LockStateGovernance || aws.ToInt32(out.LockDuration) != 2 || out.LockExpiresOn == nil || out.LockCreatedOn == nil {
		t.Errorf("governance lock %+v", out)
	}
	_, err = c.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: gov})
	wantCode(t, err, "SnapshotLocked")
	if _, err := c.UnlockSnapshot(ctx, &ec2.UnlockSnapshotInput{SnapshotId: gov}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: gov}); err != nil {
		t.Errorf("delete after unlock: %v", err)
	}
}

// A compliance lock with a cooling-off period is changeable during it, only extendable after it, and the
// snapshot is deletable once the lock has expired.
func TestComplianceLock(t *testing.T) {
	c, clk, newSnap := startLocks(t)
	ctx := ctxT(t)
	comp := newSnap()
	out, err := c.LockSnapshot(ctx, &ec2.LockSnapshotInput{SnapshotId: comp, LockMode: types.LockModeCompliance, LockDuration: aws.Int32(2), CoolOffPeriod: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	if out.LockState != types.LockStateComplianceCooloff || out.CoolOffPeriodExpiresOn == nil {
		t.Errorf("compliance lock %+v", out)
	}
	clk.Advance(2 * time.Hour)
	_, err = c.UnlockSnapshot(ctx, &ec2.UnlockSnapshotInput{SnapshotId: comp})
	wantCode(t, err, "IncorrectState")
	_, err = c.LockSnapshot(ctx, &ec2.LockSnapshotInput{SnapshotId: comp, LockMode: types.LockModeCompliance, LockDuration: aws.Int32(1)})
	wantCode(t, err, "IncorrectState")
	out, err = c.LockSnapshot(ctx, &ec2.LockSnapshotInput{SnapshotId: comp, LockMode: types.LockModeCompliance, LockDuration: aws.Int32(3)})
	if err != nil || out.LockState != types.LockStateCompliance {
		t.Fatalf("extend compliance lock: %+v %v", out, err)
	}
	_, err = c.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: comp})
	wantCode(t, err, "SnapshotLocked")
	clk.Advance(3*24*time.Hour + time.Minute)
	if _, err := c.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: comp}); err != nil {
		t.Errorf("delete after the lock expired: %v", err)
	}
}
