package cloud

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
)

func TestModifyDisk(t *testing.T) {
	tests := []struct {
		name        string
		pending     string // state of the last modification before ours, "" for none
		opts        ModifyOptions
		wantErr     error
		wantModify  bool
		wantSizeGiB int32
	}{
		{name: "grow and change throughput in one call", opts: ModifyOptions{SizeBytes: 3 << 30, Throughput: 200}, wantModify: true, wantSizeGiB: 3},
		{name: "nothing to change", opts: ModifyOptions{SizeBytes: 1 << 30, Throughput: 125}, wantSizeGiB: 1},
		{name: "shrink is a no-op", opts: ModifyOptions{SizeBytes: 1}, wantSizeGiB: 1},
		{name: "optimizing refuses another modification", pending: "optimizing", opts: ModifyOptions{SizeBytes: 2 << 30}, wantErr: ErrModificationPending},
		{name: "modifying is waited out", pending: "modifying", opts: ModifyOptions{SizeBytes: 2 << 30}, wantModify: true, wantSizeGiB: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			size, tput, state := 1, 125, tc.pending
			polls := 0
			c, h, _ := newTestCloud(t, false, map[string]func(url.Values) (string, string, string){
				"DescribeVolumes": func(url.Values) (string, string, string) {
					mu.Lock()
					defer mu.Unlock()
					x := volumeXML("vol-1", "in-use", size, "")
					if tput != 125 {
						x = replaceTput(x, tput)
					}
					return "<volumeSet>" + x + "</volumeSet>", "", ""
				},
				"DescribeVolumesModifications": func(url.Values) (string, string, string) {
					mu.Lock()
					defer mu.Unlock()
					if state == "" {
						return "", "InvalidVolumeModification.NotFound", "Modification for volume 'vol-1' does not exist."
					}
					polls++
					if state == "modifying" && polls > 1 {
						state = "optimizing"
					}
					return "<volumeModificationSet><item><volumeId>vol-1</volumeId><modificationState>" + state + "</modificationState></item></volumeModificationSet>", "", ""
				},
				"ModifyVolume": func(f url.Values) (string, string, string) {
					mu.Lock()
					defer mu.Unlock()
					if f.Get("Size") != "" {
						size = atoi(f.Get("Size"))
					}
					if f.Get("Throughput") != "" {
						tput = atoi(f.Get("Throughput"))
					}
					state = "modifying"
					polls = 0
					return "<volumeModification><volumeId>vol-1</volumeId><modificationState>modifying</modificationState></volumeModification>", "", ""
				},
			})
			got, err := c.ModifyDisk(context.Background(), "vol-1", tc.opts)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.wantSizeGiB {
				t.Fatalf("size %d, err %v", got, err)
			}
			if n := h.count("ModifyVolume"); (n == 1) != tc.wantModify || n > 1 {
				t.Fatalf("ModifyVolume calls = %d", n)
			}
		})
	}
}

func replaceTput(x string, tput int) string {
	return regexpTput.ReplaceAllString(x, "<throughput>"+itoa(tput)+"</throughput>")
}
