package ec2sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

const stateFile = "state.json"

// state is everything the emulator persists. Transitions are stored as the times they happen at, so the
// current state of each resource is a function of the clock: a restart or a different time scale needs no
// replay.
type state struct {
	Volumes   map[string]*volume   `json:"volumes"`
	Snapshots map[string]*snapshot `json:"snapshots"`
	// Tokens maps a ClientToken to what it created; EC2 keeps tokens after the resource is gone.
	Tokens map[string]clientToken `json:"tokens"`
}

type clientToken struct {
	ResourceID string `json:"resourceId"`
	Params     string `json:"params"`
}

type volume struct {
	ID             string    `json:"id"`
	Zone           string    `json:"zone"`
	Type           string    `json:"type"`
	Size           int64     `json:"sizeGiB"`
	Iops           int64     `json:"iops,omitempty"`
	Throughput     int64     `json:"throughput,omitempty"`
	Encrypted      bool      `json:"encrypted,omitempty"`
	KmsKeyID       string    `json:"kmsKeyId,omitempty"`
	MultiAttach    bool      `json:"multiAttach,omitempty"`
	SnapshotID     string    `json:"snapshotId,omitempty"`
	SourceVolumeID string    `json:"sourceVolumeId,omitempty"`
	OutpostArn     string    `json:"outpostArn,omitempty"`
	Tags           []tag     `json:"tags,omitempty"`
	CreateTime     time.Time `json:"createTime"`
	ReadyAt        time.Time `json:"readyAt"`
	// InitializedAt is when a volume restored from a snapshot has all its blocks fetched.
	InitializedAt time.Time       `json:"initializedAt"`
	Attachments   []*attachment   `json:"attachments,omitempty"`
	Modifications []*modification `json:"modifications,omitempty"`
}

type attachment struct {
	InstanceID string    `json:"instanceId"`
	Device     string    `json:"device"`
	CardIndex  *int64    `json:"ebsCardIndex,omitempty"`
	AttachTime time.Time `json:"attachTime"`
	ReadyAt    time.Time `json:"readyAt"`
	// Stuck attachments never leave `attaching` (a fault EC2 shows now and then).
	Stuck bool `json:"stuck,omitempty"`
	// Attached is set once the attachment is complete, including the loop device on a local instance.
	Attached bool      `json:"attached,omitempty"`
	DetachAt time.Time `json:"detachAt"`
}

type modification struct {
	StartTime    time.Time `json:"startTime"`
	OptimizingAt time.Time `json:"optimizingAt"`
	CompletedAt  time.Time `json:"completedAt"`
	Applied      bool      `json:"applied,omitempty"`

	OriginalSize        int64  `json:"originalSize"`
	OriginalType        string `json:"originalType"`
	OriginalIops        int64  `json:"originalIops"`
	OriginalThroughput  int64  `json:"originalThroughput"`
	OriginalMultiAttach bool   `json:"originalMultiAttach"`
	TargetSize          int64  `json:"targetSize"`
	TargetType          string `json:"targetType"`
	TargetIops          int64  `json:"targetIops"`
	TargetThroughput    int64  `json:"targetThroughput"`
	TargetMultiAttach   bool   `json:"targetMultiAttach"`
}

type snapshot struct {
	ID          string          `json:"id"`
	VolumeID    string          `json:"volumeId"`
	VolumeSize  int64           `json:"volumeSizeGiB"`
	Description string          `json:"description,omitempty"`
	Encrypted   bool            `json:"encrypted,omitempty"`
	KmsKeyID    string          `json:"kmsKeyId,omitempty"`
	OutpostArn  string          `json:"outpostArn,omitempty"`
	Tags        []tag           `json:"tags,omitempty"`
	StartTime   time.Time       `json:"startTime"`
	CompleteAt  time.Time       `json:"completeAt"`
	FastRestore map[string]bool `json:"fastRestore,omitempty"`
	Lock        *snapshotLock   `json:"lock,omitempty"`
}

func newState() *state {
	return &state{Volumes: map[string]*volume{}, Snapshots: map[string]*snapshot{}, Tokens: map[string]clientToken{}}
}

func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return newState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state: %w", err)
	}
	st := newState()
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("parse state %s: %w", filepath.Join(dir, stateFile), err)
	}
	if st.Volumes == nil {
		st.Volumes = map[string]*volume{}
	}
	if st.Snapshots == nil {
		st.Snapshots = map[string]*snapshot{}
	}
	if st.Tokens == nil {
		st.Tokens = map[string]clientToken{}
	}
	return st, nil
}

// save writes the state atomically: a reader (or a restart after a crash) sees the old or the new file.
func (st *state) save(dir string) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("replace state: %w", err)
	}
	return nil
}

// newID makes an EC2-style ID: prefix, dash, 17 hex digits.
func newID(prefix string) string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)[:17]
}

func findTag(ts []tag, key string) (string, bool) {
	for _, t := range ts {
		if t.Key == key {
			return t.Value, true
		}
	}
	return "", false
}

// setTags adds or overwrites tags, keeping first-seen order.
func setTags(ts []tag, add []tag) []tag {
	for _, a := range add {
		replaced := false
		for i := range ts {
			if ts[i].Key == a.Key {
				ts[i].Value = a.Value
				replaced = true
				break
			}
		}
		if !replaced {
			ts = append(ts, a)
		}
	}
	return ts
}

// removeTags deletes tags by key; a tag given with a value is deleted only when the value matches, as EC2 does.
func removeTags(ts []tag, del []tag, valueGiven []bool) []tag {
	out := ts[:0]
	for _, t := range ts {
		drop := false
		for i, d := range del {
			if d.Key == t.Key && (!valueGiven[i] || d.Value == t.Value) {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, t)
		}
	}
	return out
}
