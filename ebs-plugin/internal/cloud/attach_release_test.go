package cloud

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
)

// attachFake serves one instance with only a root volume; AttachVolume answers from attachErr per call.
func attachFake(t *testing.T, attachErr func(call int, f url.Values) (code, msg string), attachedState func(vol string) string) (*Cloud, *ec2Handler) {
	t.Helper()
	var mu sync.Mutex
	calls := 0
	devs := map[string]string{}
	c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"DescribeInstances": func(url.Values) (string, string, string) {
			return `<reservationSet><item><instancesSet><item><instanceId>i-1</instanceId><blockDeviceMapping><item><deviceName>/dev/xvda</deviceName><ebs><volumeId>vol-root</volumeId></ebs></item></blockDeviceMapping></item></instancesSet></item></reservationSet>`, "", ""
		},
		"AttachVolume": func(f url.Values) (string, string, string) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if code, msg := attachErr(n, f); code != "" {
				return "", code, msg
			}
			mu.Lock()
			devs[f.Get("VolumeId")] = f.Get("Device")
			mu.Unlock()
			return "<device>" + f.Get("Device") + "</device><status>attaching</status>", "", ""
		},
		"DescribeVolumes": func(f url.Values) (string, string, string) {
			vol := f.Get("VolumeId.1")
			mu.Lock()
			dev := devs[vol]
			mu.Unlock()
			att := ""
			if st := attachedState(vol); st != "" && dev != "" {
				att = fmt.Sprintf(`<item><instanceId>i-1</instanceId><device>%s</device><status>%s</status></item>`, dev, st)
			}
			return "<volumeSet>" + volumeXML(vol, "in-use", 1, att) + "</volumeSet>", "", ""
		},
	})
	return c, h
}

// TestFailedAttachVolumeReleasesTheName: when EC2 refuses AttachVolume, the name reserved for it is free
// again, so the next attach on the node gets it.
func TestFailedAttachVolumeReleasesTheName(t *testing.T) {
	for _, code := range []string{"InvalidVolume.NotFound", "VolumeInUse", "AttachmentLimitExceeded", "UnauthorizedOperation", "IncorrectState"} {
		t.Run(code, func(t *testing.T) {
			c, _ := attachFake(t, func(call int, f url.Values) (string, string) {
				if f.Get("VolumeId") == "vol-bad" {
					return code, "refused"
				}
				return "", ""
			}, func(vol string) string {
				if vol == "vol-bad" {
					return ""
				}
				return "attached"
			})
			if _, err := c.AttachDisk(context.Background(), "vol-bad", "i-1"); err == nil {
				t.Fatal("attach of vol-bad succeeded")
			}
			dev, err := c.AttachDisk(context.Background(), "vol-2", "i-1")
			if err != nil || dev != "/dev/xvdaa" {
				t.Fatalf("next attach got %q %v, want /dev/xvdaa", dev, err)
			}
		})
	}
}

// TestFailedReissuedAttachVolumeReleasesTheName: AttachVolume is accepted, the volume never shows the
// attachment, and the re-issued AttachVolume is refused: no attachment exists, so the name is free again.
func TestFailedReissuedAttachVolumeReleasesTheName(t *testing.T) {
	c, h := attachFake(t, func(call int, f url.Values) (string, string) {
		if f.Get("VolumeId") == "vol-bad" && call == 2 {
			return "InvalidVolume.NotFound", "The volume 'vol-bad' does not exist."
		}
		return "", ""
	}, func(vol string) string {
		if vol == "vol-bad" {
			return ""
		}
		return "attached"
	})
	if _, err := c.AttachDisk(context.Background(), "vol-bad", "i-1"); err == nil {
		t.Fatal("attach of vol-bad succeeded")
	}
	if h.count("AttachVolume") != 2 {
		t.Fatalf("AttachVolume calls %d, want 2", h.count("AttachVolume"))
	}
	dev, err := c.AttachDisk(context.Background(), "vol-2", "i-1")
	if err != nil || dev != "/dev/xvdaa" {
		t.Fatalf("next attach got %q %v, want /dev/xvdaa", dev, err)
	}
}

// TestAttachIncorrectStateThenAttachedReturnsTheName: AttachVolume answers IncorrectState because an earlier
// attach of the volume under the same name is in progress; once it finishes, AttachDisk returns that name
// (it used to return "" with no error).
func TestAttachIncorrectStateThenAttachedReturnsTheName(t *testing.T) {
	c, _, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
		"DescribeInstances": func(url.Values) (string, string, string) {
			return `<reservationSet><item><instancesSet><item><instanceId>i-1</instanceId></item></instancesSet></item></reservationSet>`, "", ""
		},
		"AttachVolume": func(url.Values) (string, string, string) {
			return "", "IncorrectState", "vol-1 is in the 'in-use' state."
		},
		"DescribeVolumes": func(url.Values) (string, string, string) {
			att := `<item><instanceId>i-1</instanceId><device>/dev/xvdaa</device><status>attached</status></item>`
			return "<volumeSet>" + volumeXML("vol-1", "in-use", 1, att) + "</volumeSet>", "", ""
		},
	})
	dev, err := c.AttachDisk(context.Background(), "vol-1", "i-1")
	if err != nil || dev != "/dev/xvdaa" {
		t.Fatalf("got %q %v, want /dev/xvdaa", dev, err)
	}
}
