package cloud

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/klog/v2"
)

// AttachDisk attaches the volume to the instance and waits until EC2 reports it attached. It returns the
// device name, which the node uses to find the disk.
func (c *Cloud) AttachDisk(ctx context.Context, volumeID, instanceID string) (string, error) {
	logger := klog.FromContext(ctx).WithValues("volumeID", volumeID, "instanceID", instanceID)
	inst, err := c.instances.get(ctx, instanceID)
	if err != nil {
		return "", fmt.Errorf("describe instance %s: %w", instanceID, err)
	}
	mapped := map[string]string{}
	for _, m := range inst.BlockDeviceMappings {
		if m.Ebs != nil {
			mapped[aws.ToString(m.DeviceName)] = aws.ToString(m.Ebs.VolumeId)
		}
	}
	dev, err := c.devices.Assign(instanceID, volumeID, mapped)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrLimitExceeded, err)
	}
	taint := false
	defer func() { dev.Release(taint) }()

	if !dev.Existing {
		_, err := c.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{
			Device:     aws.String(dev.Name),
			InstanceId: aws.String(instanceID),
			VolumeId:   aws.String(volumeID),
		}, c.retryers.option("AttachVolume"))
		if err != nil {
			// EC2 refused the attachment, so nothing holds the name: the deferred Release frees it.
			if err := c.attachError(ctx, volumeID, instanceID, dev.Name, err); err != nil {
				return "", err
			}
			// IncorrectState, and the attachment already in progress finished under this name.
			return dev.Name, nil
		}
		logger.V(4).Info("AttachVolume accepted", "device", dev.Name)
	}
	if err := c.waitAttached(ctx, volumeID, instanceID, dev.Name); err != nil {
		// The attachment may still complete; keep the name away from other volumes for a while. Not when
		// the wait ended because the re-issued AttachVolume was refused: the volume showed no attachment
		// here and EC2 would not make one, so the name is free.
		var refused *attachRefusedError
		taint = !errors.As(err, &refused)
		return "", err
	}
	return dev.Name, nil
}

// attachRefusedError is a re-issued AttachVolume that EC2 refused while the volume showed no attachment to
// the instance: no attachment holds the device name.
type attachRefusedError struct{ err error }

func (e *attachRefusedError) Error() string { return e.err.Error() }
func (e *attachRefusedError) Unwrap() error { return e.err }

func (c *Cloud) attachError(ctx context.Context, volumeID, instanceID, device string, err error) error {
	switch {
	case isCode(err, "InvalidParameterValue") && strings.Contains(err.Error(), "already in use"):
		c.devices.MarkLikelyBad(instanceID, device)
		return fmt.Errorf("device name %s is in use on %s, will pick another on retry: %w", device, instanceID, err)
	case isCode(err, "AttachmentLimitExceeded"):
		return fmt.Errorf("%w: %w", ErrLimitExceeded, err)
	case isCode(err, "VolumeInUse"):
		// EC2 says VolumeInUse for an attachment to this very instance too: an earlier AttachVolume whose
		// answer was lost (connection closed, 500) and that the SDK re-sent. Then it is our attachment.
		if c.attachedHere(ctx, volumeID, instanceID) {
			if werr := c.waitAttached(ctx, volumeID, instanceID, device); werr == nil {
				return nil
			}
		}
		return fmt.Errorf("volume %s is attached to another instance: %w: %w", volumeID, ErrVolumeInUse, err)
	case isCode(err, "InvalidVolume.NotFound", "InvalidInstanceID.NotFound"):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case isCode(err, "IncorrectState"):
		// Attaching a volume that is itself already being attached here: wait for that instead.
		if werr := c.waitAttached(ctx, volumeID, instanceID, device); werr == nil {
			return nil
		}
	}
	return fmt.Errorf("attach volume %s to %s: %w", volumeID, instanceID, err)
}

// attachedHere reports whether the volume is attached or attaching to the instance, as far as EC2 says now.
func (c *Cloud) attachedHere(ctx context.Context, volumeID, instanceID string) bool {
	d, err := c.GetDisk(ctx, volumeID)
	if err != nil {
		return false
	}
	for _, a := range d.Attachments {
		if a.InstanceID == instanceID && a.State != string(types.VolumeAttachmentStateDetached) && a.State != string(types.VolumeAttachmentStateDetaching) {
			return true
		}
	}
	return false
}

func (c *Cloud) waitAttached(ctx context.Context, volumeID, instanceID, device string) error {
	reissued := false
	return poll(ctx, c.waits.Attach, func(ctx context.Context) (bool, error) {
		d, err := c.GetDisk(ctx, volumeID)
		if err != nil {
			return false, err
		}
		var mine *Attachment
		for i := range d.Attachments {
			if d.Attachments[i].InstanceID == instanceID {
				mine = &d.Attachments[i]
			}
		}
		if len(d.Attachments) > 1 && !d.MultiAttach {
			return false, fmt.Errorf("volume %s has %d attachments but is not multi-attach: %w", volumeID, len(d.Attachments), ErrVolumeInUse)
		}
		if mine == nil || mine.State == string(types.VolumeAttachmentStateDetached) {
			if reissued {
				return false, fmt.Errorf("volume %s is not attached to %s after re-issuing AttachVolume", volumeID, instanceID)
			}
			// The instance may list the mapping while the volume does not: ask again once.
			reissued = true
			_, err := c.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{Device: aws.String(device),
				InstanceId: aws.String(instanceID), VolumeId: aws.String(volumeID)}, c.retryers.option("AttachVolume"))
			if err != nil && !isCode(err, "IncorrectState") {
				return false, &attachRefusedError{err: c.attachError(ctx, volumeID, instanceID, device, err)}
			}
			return false, nil
		}
		switch mine.State {
		case string(types.VolumeAttachmentStateAttached):
			if mine.Device != device {
				return false, fmt.Errorf("volume %s is attached to %s as %s, not %s", volumeID, instanceID, mine.Device, device)
			}
			return true, nil
		case string(types.VolumeAttachmentStateAttaching):
			if !mine.AttachTime.IsZero() && c.now().Sub(mine.AttachTime) > c.waits.AttachingTimeout {
				return false, c.detachStuck(ctx, volumeID, instanceID, mine.AttachTime)
			}
		}
		return false, nil
	})
}

// detachStuck undoes an attachment that has sat in "attaching" past AttachingTimeout: EC2 does not finish
// such an attachment by itself, and while it exists every new attempt fails the same way. The detach runs
// even if ctx is cancelled, because leaving the attachment stuck is what it repairs. The returned error says
// whether the detach worked.
func (c *Cloud) detachStuck(ctx context.Context, volumeID, instanceID string, since time.Time) error {
	logger := klog.FromContext(ctx).WithValues("volumeID", volumeID, "instanceID", instanceID, "attachingSince", since)
	if err := c.DetachDisk(context.WithoutCancel(ctx), volumeID, instanceID); err != nil {
		logger.Error(err, "Volume stuck attaching, and detaching it failed")
		return fmt.Errorf("volume %s stuck attaching to %s since %s, and detaching it failed: %w", volumeID, instanceID, since, err)
	}
	logger.Info("Volume stuck attaching; detached it so the next attempt starts clean")
	return fmt.Errorf("volume %s stuck attaching to %s since %s; detached it so the next attempt starts clean", volumeID, instanceID, since)
}

// DetachDisk detaches the volume from the instance and waits until it is gone. Not attached counts as done.
func (c *Cloud) DetachDisk(ctx context.Context, volumeID, instanceID string) error {
	_, err := c.ec2.DetachVolume(ctx, &ec2.DetachVolumeInput{
		InstanceId: aws.String(instanceID),
		VolumeId:   aws.String(volumeID),
	}, c.retryers.option("DetachVolume"))
	if err != nil {
		if isCode(err, "IncorrectState", "InvalidAttachment.NotFound", "InvalidVolume.NotFound") {
			return nil
		}
		if isCode(err, "InvalidInstanceID.NotFound") {
			return nil // the instance is gone, and with it the attachment
		}
		return fmt.Errorf("detach volume %s from %s: %w", volumeID, instanceID, err)
	}
	// A detach still pending when the wait gives up stays tracked, so a stuck detach shows on dashboards.
	err = poll(ctx, c.waits.Attach, func(ctx context.Context) (bool, error) {
		d, err := c.GetDisk(ctx, volumeID)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return true, nil
			}
			return false, err
		}
		for _, a := range d.Attachments {
			if a.InstanceID == instanceID && a.State != string(types.VolumeAttachmentStateDetached) {
				c.detaches.Pending(volumeID, instanceID, a.State)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for volume %s to detach from %s: %w", volumeID, instanceID, err)
	}
	c.detaches.Done(volumeID, instanceID)
	return nil
}

// WaitInitialized waits until a volume restored from a snapshot reports initialization "completed"
// (StorageClass blockAttachUntilInitialized), so a workload never reads a lazily loaded volume.
func (c *Cloud) WaitInitialized(ctx context.Context, volumeID string) error {
	return poll(ctx, c.waits.Attach, func(ctx context.Context) (bool, error) {
		out, err := c.ec2.DescribeVolumeStatus(ctx, &ec2.DescribeVolumeStatusInput{VolumeIds: []string{volumeID}})
		if err != nil {
			if isNotFound(err) {
				return false, fmt.Errorf("%w: %w", ErrNotFound, err)
			}
			return false, err
		}
		for _, st := range out.VolumeStatuses {
			if st.VolumeStatus == nil {
				continue
			}
			for _, d := range st.VolumeStatus.Details {
				if d.Name == types.VolumeStatusNameInitializationState {
					return aws.ToString(d.Status) == "completed", nil
				}
			}
		}
		return true, nil // no initialization detail: not restored from a snapshot
	})
}
