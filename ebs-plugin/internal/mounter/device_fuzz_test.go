package mounter

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// FuzzDeviceLookup feeds the node's device lookup the volume IDs and lsblk serials it reads: the volume ID
// comes from the PV (a static PV's volumeHandle is whatever its author wrote), the serial from the device.
// No input panics; a volume ID is only looked up as a by-id link inside the link directory, never as a path
// that climbs out of it; a device whose serial is the volume's own always passes the serial check.
func FuzzDeviceLookup(f *testing.F) {
	for _, s := range []string{"vol-0123456789abcdef0", "vol-", "vol-a/../../sda", "../x", "vol-\x00", "", "."} {
		f.Add(s, "vol0123456789abcdef0")
	}
	f.Add("vol-0a", "vol0a_1\n")
	f.Add("vol-0a", "vol0b")
	f.Add("vol\r0", "0")
	f.Fuzz(func(t *testing.T, volumeID, serial string) {
		m := &Mounter{LinkDir: filepath.Join(t.TempDir(), "by-id")}
		_, err := m.FindDevice("", volumeID)
		if err == nil {
			t.Fatalf("FindDevice(%q) found a device in an empty link directory", volumeID)
		}
		link := NVMeLink(volumeID)
		if filepath.Base(link) != link || strings.ContainsRune(link, 0) {
			if errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "volume ID") {
				t.Fatalf("FindDevice(%q) looked up %q: %v", volumeID, filepath.Join(m.LinkDir, link), err)
			}
		}
		own := strings.ReplaceAll(volumeID, "-", "")
		// A serial is one word: lsblk prints no blanks inside one.
		if strings.HasPrefix(own, "vol") && !strings.ContainsFunc(own, unicode.IsSpace) {
			if err := checkSerial(own+"\n", volumeID); err != nil {
				t.Fatalf("checkSerial(%q, %q) refused the volume's own serial: %v", own, volumeID, err)
			}
		}
		if err := checkSerial(serial, volumeID); err != nil && !strings.Contains(err.Error(), volumeID) {
			t.Fatalf("checkSerial(%q, %q) = %v: the error does not name the volume", serial, volumeID, err)
		}
	})
}
