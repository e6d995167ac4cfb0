// Package credentials writes the AWS credentials a Mountpoint Pod needs into its comm directory and
// returns the environment that points Mountpoint at them, with upstream's file names and variables. Files are
// written atomically, so a refresh on republish never shows Mountpoint a half-written token.
package credentials

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/renameio/v2"

	"github.com/stowage-csi/stowage/shared/mountproto"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// Modes of the credentials directory and files: the Mountpoint Pod reads them through its fsGroup.
const (
	DirMode  os.FileMode = 0o750
	FileMode os.FileMode = 0o640
)

// Audiences of the service account tokens the kubelet passes (the CSIDriver's tokenRequests).
const (
	AudienceSTS         = "sts.amazonaws.com"
	AudiencePodIdentity = "pods.eks.amazonaws.com"
)

// podPath is where the Mountpoint Pod sees the credentials directory.
var podPath = filepath.Join(s3api.CommDir, mountproto.CredentialsDir)

// DriverEnv is the node plugin's own credentials (its environment), used with authenticationSource driver.
type DriverEnv struct {
	AccessKeyID, SecretAccessKey, SessionToken string
	// RoleARN and WebIdentityTokenFile are IRSA's.
	RoleARN, WebIdentityTokenFile string
	// ContainerCredentialsFullURI and ContainerAuthorizationTokenFile are EKS Pod Identity's.
	ContainerCredentialsFullURI, ContainerAuthorizationTokenFile string
}

// Request is one mount's credentials.
type Request struct {
	// CommDir is the Mountpoint Pod's comm directory on the host.
	CommDir string
	// MountpointPodUID and VolumeID name the files (upstream's <id>).
	MountpointPodUID, VolumeID string
	// AuthenticationSource is "driver" or "pod".
	AuthenticationSource string
	// Tokens is the kubelet's csi.storage.k8s.io/serviceAccount.tokens JSON (pod mode).
	Tokens string
	// RoleARN is the workload's IRSA role from the attachment (pod mode); empty means Pod Identity.
	RoleARN string
	// STSRegion is the region for the workload's STS calls (pod mode, IRSA).
	STSRegion string
	// PodIdentityAgentURI is EKS_POD_IDENTITY_AGENT_CONTAINER_CREDENTIALS_FULL_URI (pod mode, Pod Identity).
	PodIdentityAgentURI string
}

// ID is upstream's file prefix: <escaped Mountpoint Pod UID>-<escaped volume ID>.
func (r Request) ID() string {
	return escape(r.MountpointPodUID) + "-" + escape(r.VolumeID)
}

// escape is Kubernetes' EscapeQualifiedName: a volume ID may hold "/".
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~~"), "/", "~")
}

// Write writes the files for r and returns Mountpoint's credential environment.
func Write(r Request, driver DriverEnv) (map[string]string, error) {
	dir := filepath.Join(r.CommDir, mountproto.CredentialsDir)
	// No chmod after: it would clear the setgid bit the directory inherits from the comm emptyDir, through
	// which the files get the Pod's fsGroup, the only way Mountpoint (uid 1000) can read them.
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return nil, fmt.Errorf("create credentials directory: %w", err)
	}
	w := writer{dir: dir, env: map[string]string{}}
	switch r.AuthenticationSource {
	case s3api.AuthenticationSourcePod:
		w.pod(r)
	case "", s3api.AuthenticationSourceDriver:
		w.driver(r, driver)
	default:
		return nil, fmt.Errorf("authenticationSource %q: want driver or pod", r.AuthenticationSource)
	}
	if w.err != nil {
		return nil, w.err
	}
	return w.env, nil
}

// Remove deletes every credential file of a Mountpoint Pod: it is ending, and nothing else uses them.
func Remove(commDir string) error {
	err := os.RemoveAll(filepath.Join(commDir, mountproto.CredentialsDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove credentials: %w", err)
	}
	return nil
}

// writer collects files and env; the first error stops it.
type writer struct {
	dir string
	env map[string]string
	err error
}

// file writes name atomically and returns its path in the Pod. The temporary file is made in the same
// directory, so it takes the directory's group (the Pod's fsGroup) and the rename never crosses filesystems.
func (w *writer) file(name string, data []byte) string {
	if w.err == nil {
		if err := renameio.WriteFile(filepath.Join(w.dir, name), data, FileMode, renameio.IgnoreUmask(), renameio.WithTempDir(w.dir)); err != nil {
			w.err = fmt.Errorf("write credential file %s: %w", name, err)
		}
	}
	return filepath.Join(podPath, name)
}

func (w *writer) driver(r Request, d DriverEnv) {
	if d.AccessKeyID != "" && d.SecretAccessKey != "" {
		profile := r.ID() + "-s3-csi"
		creds := fmt.Sprintf("[%s]\naws_access_key_id=%s\naws_secret_access_key=%s\n", profile, d.AccessKeyID, d.SecretAccessKey)
		if d.SessionToken != "" {
			creds += "aws_session_token=" + d.SessionToken + "\n"
		}
		w.env["AWS_PROFILE"] = profile
		w.env["AWS_CONFIG_FILE"] = w.file(profile+"-config", fmt.Appendf(nil, "[profile %s]\n", profile))
		w.env["AWS_SHARED_CREDENTIALS_FILE"] = w.file(profile+"-credentials", []byte(creds))
	}
	if d.RoleARN != "" && d.WebIdentityTokenFile != "" {
		if tok := w.copy(d.WebIdentityTokenFile); w.err == nil {
			w.env["AWS_ROLE_ARN"] = d.RoleARN
			w.env["AWS_WEB_IDENTITY_TOKEN_FILE"] = w.file("token", tok)
		}
	}
	if d.ContainerCredentialsFullURI != "" && d.ContainerAuthorizationTokenFile != "" {
		if tok := w.copy(d.ContainerAuthorizationTokenFile); w.err == nil {
			w.env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = d.ContainerCredentialsFullURI
			w.env["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = w.file("eks-pod-identity-token", tok)
		}
	}
}

func (w *writer) copy(path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("read the driver's token: %w", err)
	}
	return b
}

// serviceAccountTokens is the kubelet's csi.storage.k8s.io/serviceAccount.tokens value.
type serviceAccountTokens map[string]struct {
	Token string `json:"token"`
}

func (w *writer) pod(r Request) {
	var toks serviceAccountTokens
	if r.Tokens == "" {
		w.err = errors.New("authenticationSource pod needs the workload's service account tokens (volume context csi.storage.k8s.io/serviceAccount.tokens): is the CSIDriver's tokenRequests set?")
		return
	}
	if err := json.Unmarshal([]byte(r.Tokens), &toks); err != nil {
		w.err = fmt.Errorf("volume context csi.storage.k8s.io/serviceAccount.tokens is not valid JSON: %w", err)
		return
	}
	audience := AudiencePodIdentity
	if r.RoleARN != "" {
		audience = AudienceSTS
	}
	tok := toks[audience].Token
	if tok == "" {
		w.err = fmt.Errorf("volume context csi.storage.k8s.io/serviceAccount.tokens has no token for audience %s", audience)
		return
	}
	w.env["AWS_EC2_METADATA_DISABLED"] = "true"
	if r.RoleARN != "" {
		if r.STSRegion == "" {
			w.err = errors.New("authenticationSource pod with IRSA needs an STS region: set the volume attribute stsRegion, the mount option region, or AWS_REGION on the node plugin, or let the node reach IMDS")
			return
		}
		w.env["AWS_ROLE_ARN"] = r.RoleARN
		w.env["AWS_WEB_IDENTITY_TOKEN_FILE"] = w.file(r.ID()+".token", []byte(tok))
		w.env["AWS_REGION"] = r.STSRegion
		w.env["AWS_DEFAULT_REGION"] = r.STSRegion
		return
	}
	if r.PodIdentityAgentURI == "" {
		w.err = errors.New("authenticationSource pod with EKS Pod Identity needs EKS_POD_IDENTITY_AGENT_CONTAINER_CREDENTIALS_FULL_URI on the node plugin (or an IRSA role on the workload's ServiceAccount)")
		return
	}
	w.env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = r.PodIdentityAgentURI
	w.env["AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"] = w.file(r.ID()+"-eks-pod-identity.token", []byte(tok))
}
