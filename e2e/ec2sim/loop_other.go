//go:build !linux

package ec2sim

import (
	"errors"
	"strings"

	"k8s.io/klog/v2"
)

// LinkName is the by-id name Nitro instances give an EBS volume's NVMe device.
func LinkName(volumeID string) string {
	return "nvme-Amazon_Elastic_Block_Store_" + strings.ReplaceAll(volumeID, "-", "")
}

var errNoLoop = errors.New("loop devices need Linux; mark no instance Local")

// loopManager refuses local attachments off Linux; everything else in the emulator works.
type loopManager struct{}

func newLoopManager(klog.Logger, string, string) *loopManager { return &loopManager{} }
func (*loopManager) ensure(string, string, string) error      { return errNoLoop }
func (*loopManager) release(string, string) error             { return nil }
func (*loopManager) grow(string) error                        { return nil }
func (*loopManager) device(string) (string, string)           { return "", "" }
func (*loopManager) releaseAll() error                        { return nil }
func (*loopManager) releaseStale()                            {}
