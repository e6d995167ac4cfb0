package nvmemetrics

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The EBS vendor-specific log page: its ID, the size read, and the layout of the statistics at its start.
// All fields are little-endian uint64; times are in microseconds.
const (
	// LogPageID is the EBS statistics log page.
	LogPageID = 0xD0
	// LogPageSize is how many bytes of the page are read.
	LogPageSize = 4096

	ebsMagic = 0x3C23B510
	// 12 counters, 416 reserved bytes, then the read and write histograms: a bin count and 64 bins of
	// (lower, upper, count).
	countersSize  = 12 * 8
	reservedSize  = 416
	maxBins       = 64
	binSize       = 3 * 8
	histogramSize = 8 + maxBins*binSize
	readHistAt    = countersSize + reservedSize
	writeHistAt   = readHistAt + histogramSize
	// StatsSize is the length of the statistics the parser reads.
	StatsSize = writeHistAt + histogramSize
)

// Errors of Parse, for callers that tell a short page from a page of another device.
var (
	ErrShortLogPage = errors.New("EBS log page too short")
	ErrBadMagic     = errors.New("not an EBS log page: wrong magic number")
)

// Stats are the statistics of one EBS volume as the device reports them since it was attached.
type Stats struct {
	ReadOps    uint64
	WriteOps   uint64
	ReadBytes  uint64
	WriteBytes uint64
	// Times in microseconds.
	TotalReadTime         uint64
	TotalWriteTime        uint64
	EBSIOPSExceeded       uint64
	EBSThroughputExceeded uint64
	EC2IOPSExceeded       uint64
	EC2ThroughputExceeded uint64
	QueueLength           uint64
	ReadLatency           []Bin
	WriteLatency          []Bin
}

// Bin is one latency bin: Count operations completed in [Lower, Upper) microseconds.
type Bin struct {
	Lower, Upper, Count uint64
}

// Parse decodes the statistics at the start of an EBS log page. A bin count above 64 is read as 64, as
// upstream does, since the page has room for no more.
func Parse(page []byte) (Stats, error) {
	if len(page) < StatsSize {
		return Stats{}, fmt.Errorf("%w: %d bytes, want at least %d", ErrShortLogPage, len(page), StatsSize)
	}
	u64 := func(off int) uint64 { return binary.LittleEndian.Uint64(page[off : off+8]) }
	if m := u64(0); m != ebsMagic {
		return Stats{}, fmt.Errorf("%w: %#x", ErrBadMagic, m)
	}
	return Stats{
		ReadOps:               u64(1 * 8),
		WriteOps:              u64(2 * 8),
		ReadBytes:             u64(3 * 8),
		WriteBytes:            u64(4 * 8),
		TotalReadTime:         u64(5 * 8),
		TotalWriteTime:        u64(6 * 8),
		EBSIOPSExceeded:       u64(7 * 8),
		EBSThroughputExceeded: u64(8 * 8),
		EC2IOPSExceeded:       u64(9 * 8),
		EC2ThroughputExceeded: u64(10 * 8),
		QueueLength:           u64(11 * 8),
		ReadLatency:           parseBins(page[readHistAt : readHistAt+histogramSize]),
		WriteLatency:          parseBins(page[writeHistAt : writeHistAt+histogramSize]),
	}, nil
}

// parseBins decodes one histogram: its bin count, then that many of the 64 bins.
func parseBins(h []byte) []Bin {
	n := min(binary.LittleEndian.Uint64(h), maxBins)
	bins := make([]Bin, n)
	for i := range bins {
		b := h[8+i*binSize:]
		bins[i] = Bin{
			Lower: binary.LittleEndian.Uint64(b),
			Upper: binary.LittleEndian.Uint64(b[8:]),
			Count: binary.LittleEndian.Uint64(b[16:]),
		}
	}
	return bins
}
