package mounter

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/stowage-csi/stowage/shared/mountproto"
)

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(p) > b.max {
		p = p[len(p)-b.max:]
		b.truncated = true
	}
	if over := len(b.buf) + len(p) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
		b.truncated = true
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

// Bytes returns what is kept, marked when earlier output was dropped.
func (b *tailBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out bytes.Buffer
	if b.truncated {
		out.WriteString("[earlier output dropped]\n")
	}
	out.Write(b.buf)
	return out.Bytes()
}

// writeError writes Mountpoint's stderr and why it ended to <commDir>/mount.err, where the node reads it
// and reports it on the workload. The file is written under another name and renamed, so the node, which
// polls for it, never reads half of it; 0600 as upstream, since stderr may name buckets and keys.
func writeError(commDir string, stderr *tailBuffer, cause error) error {
	var content bytes.Buffer
	content.Write(stderr.Bytes())
	if content.Len() > 0 && !bytes.HasSuffix(content.Bytes(), []byte("\n")) {
		content.WriteByte('\n')
	}
	fmt.Fprintf(&content, "%v\n", cause)

	tmp, err := os.CreateTemp(commDir, mountproto.ErrorName+".tmp-*")
	if err != nil {
		return fmt.Errorf("create the error file in %s: %w", commDir, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed; CreateTemp made it 0600
	if _, err := tmp.Write(content.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	path := filepath.Join(commDir, mountproto.ErrorName)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename the error file to %s: %w", path, err)
	}
	return nil
}
