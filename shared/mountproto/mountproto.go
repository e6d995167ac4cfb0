// Package mountproto is the contract between the S3 node plugin and the Mountpoint Pod: the node opens and
// mounts /dev/fuse (it is privileged; the Pod is not) and sends the FUSE file descriptor, the bucket, the
// Mountpoint arguments and the environment in one message over the Pod's unix socket (SCM_RIGHTS). The
// message is upstream's JSON, so Stowage's node and mounter interoperate with upstream's.
package mountproto

import (
	"os"
	"path/filepath"
)

// File names in the Mountpoint Pod's comm directory (upstream's).
const (
	// SocketName is the socket the mounter listens on and the node sends to.
	SocketName = "mount.sock"
	// ErrorName is where the mounter writes Mountpoint's stderr when it fails; the node reports its content.
	ErrorName = "mount.err"
	// ExitName is created by the node when the Mountpoint Pod should end: the mounter then exits 0.
	ExitName = "mount.exit"
	// CredentialsDir holds the credential files the node writes for Mountpoint.
	CredentialsDir = "credentials"
)

// Options is one mount request.
type Options struct {
	// Fd is the FUSE file descriptor; it travels as SCM_RIGHTS, not in the JSON.
	Fd int `json:"-"`
	// BucketName is the bucket to mount.
	BucketName string `json:"bucketName"`
	// Args are Mountpoint's arguments, each "--k=v" or "--k", sorted.
	Args []string `json:"args"`
	// Env is Mountpoint's whole environment, each "K=V", sorted.
	Env []string `json:"env"`
	// VolumeID is set only by a mounter that serves several volumes (upstream's daemonset mode).
	VolumeID string `json:"volumeId,omitempty"`
}

// Exited reports whether the comm directory holds the exit marker: the node asked the Pod to end.
func Exited(commDir string) bool {
	_, err := os.Stat(filepath.Join(commDir, ExitName))
	return err == nil
}
