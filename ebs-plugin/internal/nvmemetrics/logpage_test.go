package nvmemetrics

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// rawStats is the statistics structure as EBS documents it: little-endian, in this order, with the
// reserved area and the fixed 64-bin histograms. The tests encode pages with it, so the parser's offsets
// are checked against a layout they do not share.
type rawStats struct {
	Magic, ReadOps, WriteOps, ReadBytes, WriteBytes     uint64
	TotalReadTime, TotalWriteTime                       uint64
	EBSIOPSExceeded, EBSThroughputExceeded              uint64
	EC2IOPSExceeded, EC2ThroughputExceeded, QueueLength uint64
	Reserved                                            [416]byte
	ReadLatency, WriteLatency                           rawHistogram
}

type rawHistogram struct {
	BinCount uint64
	Bins     [64]rawBin
}

type rawBin struct{ Lower, Upper, Count uint64 }

// encodePage lays raw out as a full log page.
func encodePage(t testing.TB, raw rawStats) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, raw); err != nil {
		t.Fatal(err)
	}
	page := make([]byte, LogPageSize)
	copy(page, buf.Bytes())
	return page
}

// sampleRaw has a distinct value in every field, and bins past each bin count that must not be read.
func sampleRaw() rawStats {
	raw := rawStats{Magic: ebsMagic, ReadOps: 11, WriteOps: 12, ReadBytes: 13, WriteBytes: 14, TotalReadTime: 15,
		TotalWriteTime: 16, EBSIOPSExceeded: 17, EBSThroughputExceeded: 18, EC2IOPSExceeded: 19,
		EC2ThroughputExceeded: 20, QueueLength: 21}
	for i := range raw.Reserved {
		raw.Reserved[i] = 0xAA
	}
	raw.ReadLatency.BinCount = 2
	raw.ReadLatency.Bins[0] = rawBin{0, 100, 2}
	raw.ReadLatency.Bins[1] = rawBin{100, 1000, 3}
	raw.ReadLatency.Bins[2] = rawBin{1000, 2000, 99}
	raw.WriteLatency.BinCount = 1
	raw.WriteLatency.Bins[0] = rawBin{200, 500, 7}
	raw.WriteLatency.Bins[1] = rawBin{500, 900, 99}
	return raw
}

func TestParseReadsEveryFieldOfTheDocumentedLayout(t *testing.T) {
	got, err := Parse(encodePage(t, sampleRaw()))
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{ReadOps: 11, WriteOps: 12, ReadBytes: 13, WriteBytes: 14, TotalReadTime: 15, TotalWriteTime: 16,
		EBSIOPSExceeded: 17, EBSThroughputExceeded: 18, EC2IOPSExceeded: 19, EC2ThroughputExceeded: 20, QueueLength: 21,
		ReadLatency:  []Bin{{0, 100, 2}, {100, 1000, 3}},
		WriteLatency: []Bin{{200, 500, 7}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse =\n%+v\nwant\n%+v", got, want)
	}
	if size := binary.Size(rawStats{}); size != StatsSize {
		t.Fatalf("documented layout is %d bytes, parser reads %d", size, StatsSize)
	}
}

func TestParseReadsAtMost64Bins(t *testing.T) {
	raw := sampleRaw()
	raw.ReadLatency.BinCount = 1 << 40
	for i := range raw.ReadLatency.Bins {
		raw.ReadLatency.Bins[i] = rawBin{uint64(i), uint64(i + 1), 1}
	}
	got, err := Parse(encodePage(t, raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.ReadLatency) != 64 || got.ReadLatency[63] != (Bin{63, 64, 1}) {
		t.Fatalf("read bins: %d, last %+v; want 64, the last {63 64 1}", len(got.ReadLatency), got.ReadLatency[len(got.ReadLatency)-1])
	}
}

func TestParseRefusesShortPagesAndOtherDevices(t *testing.T) {
	wrongMagic := sampleRaw()
	wrongMagic.Magic = 0x1234
	for _, tc := range []struct {
		name string
		page []byte
		want error
	}{
		{"empty", nil, ErrShortLogPage},
		{"one byte short", encodePage(t, sampleRaw())[:StatsSize-1], ErrShortLogPage},
		{"zeroed page", make([]byte, LogPageSize), ErrBadMagic},
		{"another magic", encodePage(t, wrongMagic), ErrBadMagic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse(tc.page); !errors.Is(err, tc.want) {
				t.Fatalf("Parse = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestParseAcceptsExactlyTheStatistics(t *testing.T) {
	if _, err := Parse(encodePage(t, sampleRaw())[:StatsSize]); err != nil {
		t.Fatalf("Parse of the %d bytes of statistics alone = %v", StatsSize, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(encodePage(f, sampleRaw()))
	f.Add(make([]byte, StatsSize))
	f.Fuzz(func(t *testing.T, page []byte) {
		s, err := Parse(page)
		if err != nil {
			return
		}
		if len(s.ReadLatency) > 64 || len(s.WriteLatency) > 64 {
			t.Fatalf("%d read and %d write bins, at most 64 each", len(s.ReadLatency), len(s.WriteLatency))
		}
		if binary.LittleEndian.Uint64(page) != ebsMagic {
			t.Fatalf("accepted a page without the EBS magic number")
		}
	})
}
